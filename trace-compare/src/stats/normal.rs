//! The standard normal distribution's survival function, arranged as Cephes'
//! `ndtr` (which SciPy's `norm.sf` calls) arranges it, so that the asymptotic
//! Mann-Whitney p-values agree with SciPy's to the last few bits.

use std::f64::consts::FRAC_1_SQRT_2;

/// `P(Z <= a)` for a standard normal `Z`.
pub fn cdf(a: f64) -> f64 {
    let x = a * FRAC_1_SQRT_2;
    let z = x.abs();
    if z < FRAC_1_SQRT_2 {
        0.5 + 0.5 * libm::erf(x)
    } else {
        let y = 0.5 * libm::erfc(z);
        if x > 0.0 {
            1.0 - y
        } else {
            y
        }
    }
}

/// `P(Z > z)` for a standard normal `Z`: `cdf(-z)`, as SciPy computes it.
pub fn sf(z: f64) -> f64 {
    cdf(-z)
}
