//! OTLP/HTTP: one POST per body, with a timeout and bounded retries.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{ErrorKind, ExportError};

/// Which signal a body holds, and so its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// `POST /v1/traces`.
    Traces,
    /// `POST /v1/metrics`.
    Metrics,
}

impl Signal {
    /// The path appended to a base endpoint.
    pub fn path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }

    /// The signal-specific endpoint variable, used as the full URL.
    pub fn endpoint_var(self) -> &'static str {
        match self {
            Signal::Traces => "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            Signal::Metrics => "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        }
    }
}

/// The body's encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf` (the default).
    Protobuf,
    /// `application/json` (OTLP/JSON).
    Json,
}

impl Encoding {
    fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// Statuses worth another try, as the OTLP specification lists them.
pub const RETRYABLE: [u16; 4] = [429, 502, 503, 504];

/// How to send.
#[derive(Clone, Debug)]
pub struct Sender {
    agent: ureq::Agent,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`, `--header`).
    pub headers: Vec<(String, String)>,
    /// How long one request may take, connecting included.
    pub timeout: Duration,
    /// Retries after the first attempt, on a retryable status only.
    pub retries: u32,
    /// The longest wait before a retry; a `Retry-After` asking for more fails at once.
    pub max_wait: Duration,
    /// The wait before the first retry when the receiver gives no `Retry-After`;
    /// doubled for each further one.
    pub backoff: Duration,
}

/// What one successful POST took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posted {
    /// The URL.
    pub url: String,
    /// The final status.
    pub status: u16,
    /// Attempts made (1 when the first succeeded).
    pub attempts: u32,
}

impl Sender {
    /// A sender with these limits.
    pub fn new(headers: Vec<(String, String)>, timeout: Duration, retries: u32) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .user_agent(concat!("cabin-trace-export/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Sender {
            agent,
            headers,
            timeout,
            retries,
            max_wait: Duration::from_secs(30),
            backoff: Duration::from_secs(1),
        }
    }

    /// POSTs `body` to `url`, retrying on 429/502/503/504 (honouring
    /// `Retry-After`) up to [`Sender::retries`] times. A refused connection or
    /// a timeout is not retried: the export fails at once, naming the URL.
    pub fn post(&self, url: &str, encoding: Encoding, body: &[u8]) -> Result<Posted, ExportError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut req = self.agent.post(url).header("Content-Type", encoding.content_type());
            for (k, v) in &self.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            let mut resp = match req.send(body) {
                Ok(r) => r,
                Err(ureq::Error::Timeout(_)) => {
                    return Err(ExportError::new(
                        ErrorKind::Timeout,
                        format!(
                            "POST {url}: no answer within the timeout of {:?} (attempt {attempt})",
                            self.timeout
                        ),
                    )
                    .with_url(url))
                }
                Err(e) => {
                    return Err(ExportError::new(
                        ErrorKind::Transport,
                        format!("POST {url}: {e} (attempt {attempt}); is a collector listening there?"),
                    )
                    .with_url(url))
                }
            };
            let status = resp.status().as_u16();
            if (200..300).contains(&status) {
                return Ok(Posted { url: url.to_string(), status, attempts: attempt });
            }
            let retry_after =
                resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
            let text = resp.body_mut().with_config().limit(4096).read_to_string().unwrap_or_default();
            let excerpt: String = text.chars().take(300).collect();
            let fail = |why: String| {
                ExportError::new(
                    ErrorKind::Status,
                    format!("POST {url}: HTTP {status}{why}: `{}`", excerpt.trim()),
                )
                .with_url(url)
                .with_status(status)
            };
            if !RETRYABLE.contains(&status) {
                return Err(fail(String::new()));
            }
            if attempt > self.retries {
                return Err(fail(format!(" after {attempt} attempts")));
            }
            let wait = match retry_after.as_deref().map(parse_retry_after) {
                Some(Some(w)) => w,
                // An unreadable Retry-After, or none: our own back-off.
                _ => self.backoff.saturating_mul(1 << (attempt - 1).min(16)),
            };
            if wait > self.max_wait {
                return Err(fail(format!(
                    "; the receiver asks to retry after {wait:?}, longer than the limit of {:?}",
                    self.max_wait
                )));
            }
            std::thread::sleep(wait);
        }
    }
}

/// Reads a `Retry-After` value: delay-seconds, or an HTTP-date (IMF-fixdate,
/// `Sun, 06 Nov 1994 08:49:37 GMT`) turned into the time from now.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = parse_http_date(value)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// Unix seconds of an IMF-fixdate.
fn parse_http_date(s: &str) -> Option<u64> {
    let mut parts = s.split_whitespace();
    let (_weekday, day, month, year, time, zone) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if zone != "GMT" || parts.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let mut hms = time.split(':').map(|x| x.parse::<i64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + sec).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO),
            "a date past is now"
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 PST"), None);
    }
}
