//! Validation rules of configuration values (garde `custom` rules). garde's
//! built-in messages ("lower than 1") do not say what the value was, so every
//! rule here writes the message the configuration reference promises: the
//! rule, then `(got VALUE)`.
//!
//! They live in the leaf crate because the configuration's sections are
//! defined in more than one crate (`compact-middleware`'s `config`,
//! `compact-summarize`'s `summarizer:`) and must say the same thing; the
//! rules that read other fields of the configuration stay with it.

use garde::Error;

/// A share of the context window: between 0.0 and 1.0.
pub fn fraction(value: &f64, _: &()) -> garde::Result {
    if (0.0..=1.0).contains(value) {
        Ok(())
    } else {
        Err(Error::new(format!(
            "must be between 0.0 and 1.0 (got {value})"
        )))
    }
}

/// [`fraction`] when set.
pub fn opt_fraction(value: &Option<f64>, ctx: &()) -> garde::Result {
    value.as_ref().map_or(Ok(()), |v| fraction(v, ctx))
}

/// At least `min`.
pub fn at_least(min: usize) -> impl FnOnce(&usize, &()) -> garde::Result {
    move |value, _| {
        if *value >= min {
            Ok(())
        } else {
            Err(Error::new(format!("must be at least {min} (got {value})")))
        }
    }
}

/// At least `min`, for `u64` values (milliseconds, bytes).
pub fn at_least_u64(min: u64) -> impl FnOnce(&u64, &()) -> garde::Result {
    move |value, _| {
        if *value >= min {
            Ok(())
        } else {
            Err(Error::new(format!("must be at least {min} (got {value})")))
        }
    }
}

/// At most `max`.
pub fn at_most_count(max: usize) -> impl FnOnce(&usize, &()) -> garde::Result {
    move |value, _| {
        if *value <= max {
            Ok(())
        } else {
            Err(Error::new(format!("must be at most {max} (got {value})")))
        }
    }
}

/// [`at_least`] when set.
pub fn opt_at_least(min: usize) -> impl FnOnce(&Option<usize>, &()) -> garde::Result {
    move |value, ctx| value.map_or(Ok(()), |v| at_least(min)(&v, ctx))
}

/// Not empty, nor only whitespace.
pub fn non_empty(value: &str, _: &()) -> garde::Result {
    if value.trim().is_empty() {
        Err(Error::new("must not be empty"))
    } else {
        Ok(())
    }
}

/// [`non_empty`] when set.
pub fn opt_non_empty(value: &Option<String>, ctx: &()) -> garde::Result {
    value.as_ref().map_or(Ok(()), |v| non_empty(v, ctx))
}

/// An `http://` or `https://` URL that names a host.
pub fn http_url(value: &str, _: &()) -> garde::Result {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        Some(_) => Err(Error::new(format!("must name a host (got {value:?})"))),
        None => Err(Error::new(format!(
            "must start with http:// or https:// (got {value:?})"
        ))),
    }
}

/// [`http_url`] when set.
pub fn opt_http_url(value: &Option<String>, ctx: &()) -> garde::Result {
    value.as_ref().map_or(Ok(()), |v| http_url(v, ctx))
}
