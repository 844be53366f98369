//! The statistics against SciPy's and numpy's values (tests/vectors/gen.py
//! computed them; it says how to regenerate them).

use serde_json::Value;
use trace_compare::stats::{mann_whitney_u, sign_flip, Spread};

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("reference.json")).expect("JSON")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

fn close(name: &str, what: &str, ours: f64, scipy: f64) {
    let tol = 1e-12 * scipy.abs().max(1e-300);
    assert!((ours - scipy).abs() <= tol, "{name}: {what}: ours {ours:e}, SciPy {scipy:e}");
}

#[test]
fn mann_whitney_u_and_p_match_scipy_to_1e_12() {
    let v = vectors();
    let cases = v["mwu"].as_array().unwrap();
    assert!(cases.len() >= 16);
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let r = mann_whitney_u(&floats(&c["x"]), &floats(&c["y"]));
        close(name, "U", r.u1, c["u1"].as_f64().unwrap());
        close(name, "p", r.p, c["p"].as_f64().unwrap());
        assert_eq!(r.method.as_str(), c["method"].as_str().unwrap(), "{name}");
    }
}

#[test]
fn the_exact_distribution_is_used_while_one_side_has_at_most_eight_samples() {
    let v = vectors();
    let method = |name: &str| {
        v["mwu"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap()["method"].clone()
    };
    assert_eq!(method("normal 8 v 8"), "exact");
    assert_eq!(method("normal 8 v 9"), "exact");
    assert_eq!(method("normal 9 v 9"), "asymptotic");
    assert_eq!(method("ties 6 v 7"), "asymptotic");
}

#[test]
fn medians_and_quartiles_match_numpy_percentile_to_1e_12() {
    for c in vectors()["quantiles"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let s = Spread::of(&floats(&c["x"]));
        close(name, "q1", s.q1, c["q1"].as_f64().unwrap());
        close(name, "median", s.median, c["median"].as_f64().unwrap());
        close(name, "q3", s.q3, c["q3"].as_f64().unwrap());
    }
}

#[test]
fn sign_flip_p_and_interval_match_the_brute_force_reference() {
    for c in vectors()["signflip"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let alpha = c["alpha"].as_f64().unwrap();
        let m = c["m"].as_u64().unwrap() as u32;
        let r = sign_flip(&floats(&c["d"]), alpha, m, 0);
        close(name, "p", r.p, c["p"].as_f64().unwrap());
        assert_eq!(r.k, c["k"].as_u64().unwrap(), "{name}: k");
        match (&r.interval, c["interval"].as_array()) {
            (None, None) => {}
            (Some((lo, hi)), Some(iv)) => {
                close(name, "lower", *lo, iv[0].as_f64().unwrap());
                close(name, "upper", *hi, iv[1].as_f64().unwrap());
            }
            (ours, theirs) => panic!("{name}: interval {ours:?}, reference {theirs:?}"),
        }
    }
}
