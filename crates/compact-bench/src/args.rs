//! Command-line helpers the examples share.

/// The comma-separated values after `flag` in `args` (those that do not
/// parse are skipped); `None` when the flag or its value is missing.
pub fn list<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<Vec<T>> {
    let i = args.iter().position(|a| a == flag)?;
    Some(
        args.get(i + 1)?
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::list;

    #[test]
    fn a_flag_s_comma_list_parses_and_skips_what_does_not() {
        let args: Vec<String> = ["--seeds", "1, 2,x,3", "--json"].map(String::from).to_vec();
        assert_eq!(list::<u64>(&args, "--seeds"), Some(vec![1, 2, 3]));
        assert_eq!(list::<u64>(&args, "--windows"), None);
        assert_eq!(list::<u64>(&args, "--json"), None);
    }
}
