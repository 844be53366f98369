//! A scenario's checks: `<metric> <op> <number>`, e.g. `ninja_actions == 0`.

use std::collections::BTreeMap;

use anyhow::bail;
use trace_compare::samples::CheckResult;
use trace_compare::Metric;

/// The metric name a check uses for the run's exit code.
pub const EXIT_STATUS: &str = "exit_status";

/// One parsed check.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    text: String,
    metric: String,
    op: Op,
    value: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
}

impl Check {
    /// Parses `metric op number`; the metric is `exit_status` or any metric
    /// name of a run (`ninja_actions`, `count:resolve`, `field:resolve.packages`,
    /// `wall`, ...).
    pub fn parse(text: &str) -> anyhow::Result<Check> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let usage =
            "expected `<metric> <op> <number>` with op one of == != <= >= < >, e.g. `ninja_actions == 0`";
        let [metric, op, value] = words[..] else { bail!("check `{text}`: {usage}") };
        let op = match op {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "<=" => Op::Le,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            ">" => Op::Gt,
            other => bail!("check `{text}`: `{other}` is not an operator; {usage}"),
        };
        let Ok(value) = value.parse::<f64>() else {
            bail!("check `{text}`: `{value}` is not a number; {usage}")
        };
        Ok(Check { text: text.to_string(), metric: metric.to_string(), op, value })
    }

    /// The check as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True when it is about the exit status.
    pub fn is_exit_status(&self) -> bool {
        self.metric == EXIT_STATUS
    }

    /// Evaluates it on one run: its exit code (`None` when killed) and metrics.
    /// A metric the run did not record fails the check.
    pub fn eval(&self, exit_code: Option<i32>, metrics: &BTreeMap<Metric, f64>) -> CheckResult {
        let found = if self.is_exit_status() {
            exit_code.map(f64::from)
        } else {
            metrics.iter().find(|(m, _)| m.name == self.metric).map(|(_, &v)| v)
        };
        let passed = found.is_some_and(|f| match self.op {
            Op::Eq => f == self.value,
            Op::Ne => f != self.value,
            Op::Le => f <= self.value,
            Op::Ge => f >= self.value,
            Op::Lt => f < self.value,
            Op::Gt => f > self.value,
        });
        let mut result = CheckResult::default();
        result.check = self.text.clone();
        result.passed = passed;
        result.found = found;
        result
    }
}

/// The checks of a scenario: those given, with `exit_status == 0` first
/// unless one of them is about the exit status.
pub fn with_default(texts: &[String]) -> anyhow::Result<Vec<Check>> {
    let mut checks: Vec<Check> = texts.iter().map(|t| Check::parse(t)).collect::<anyhow::Result<_>>()?;
    if !checks.iter().any(Check::is_exit_status) {
        checks.insert(0, Check::parse("exit_status == 0")?);
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_compare::Kind;

    #[test]
    fn a_check_on_a_missing_metric_fails_and_says_it_found_nothing() {
        let c = Check::parse("ninja_actions == 0").unwrap();
        let r = c.eval(Some(0), &BTreeMap::new());
        assert!(!r.passed);
        assert_eq!(r.found, None);
        let m = [(Metric::new("ninja_actions", Kind::Work), 0.0)].into();
        assert!(c.eval(Some(0), &m).passed);
    }

    #[test]
    fn a_malformed_check_is_refused_with_the_expected_form() {
        let e = Check::parse("ninja actions == 0").unwrap_err().to_string();
        assert!(e.contains("expected `<metric> <op> <number>`"), "{e}");
        assert!(Check::parse("exit_status = 0").unwrap_err().to_string().contains("not an operator"));
    }
}
