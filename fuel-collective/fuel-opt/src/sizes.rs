//! Byte-size lists for `fuel-opt bench --sizes`: `64K,1M` or a doubling
//! range `4K..64M`. Suffixes K, M and G are powers of 1024; a bare number is
//! bytes.

/// Parses one size such as `4K`, `1M`, `512`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let shown = fuel_graph_ext::text::excerpt::token(s);
    let n: usize = num
        .parse()
        .map_err(|_| format!("`{shown}` is not a size: expected e.g. 512, 64K, 1M or 2G"))?;
    n.checked_mul(mult)
        .filter(|b| *b > 0 && *b <= fuel_graph_ext::dtype::MAX_TENSOR_BYTES)
        .ok_or_else(|| {
            format!(
                "`{shown}` must be a positive size of at most {} bytes",
                fuel_graph_ext::dtype::MAX_TENSOR_BYTES
            )
        })
}

/// Parses `A..B` (doubling from A up to B) or a comma list; an empty list
/// is an error.
pub fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    let sizes = parse_size_list(s)?;
    if sizes.is_empty() {
        return Err("no sizes given: expected e.g. 64K,1M or a range 4K..64M".into());
    }
    Ok(sizes)
}

fn parse_size_list(s: &str) -> Result<Vec<usize>, String> {
    if let Some((a, b)) = s.split_once("..") {
        let (lo, hi) = (parse_size(a)?, parse_size(b)?);
        if lo > hi {
            return Err(format!("`{s}`: the range start is larger than its end"));
        }
        let mut out = Vec::new();
        let mut x = lo;
        while x <= hi {
            out.push(x);
            match x.checked_mul(2) {
                Some(n) => x = n,
                None => break,
            }
        }
        Ok(out)
    } else {
        s.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(parse_size)
            .collect()
    }
}

/// Parses a list of whole counts (`2,8`) or a doubling range (`2..1024`),
/// each from 1 to `max`; `what` names a count in messages (`process
/// count`).
pub fn parse_counts(s: &str, what: &str, max: usize) -> Result<Vec<usize>, String> {
    let one = |t: &str| -> Result<usize, String> {
        t.trim().parse::<usize>().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
            format!(
                "`{}` is not a {what}: give a whole number from 1 to {max}, a list (2,8) or a doubling range (2..1024)",
                fuel_graph_ext::text::excerpt::token(t.trim())
            )
        })
    };
    let counts = match s.split_once("..") {
        Some((a, b)) => {
            let (lo, hi) = (one(a)?, one(b)?);
            if lo > hi {
                return Err(format!(
                    "`{}`: the range start is larger than its end",
                    fuel_graph_ext::text::excerpt::token(s)
                ));
            }
            std::iter::successors(Some(lo), |x| x.checked_mul(2).filter(|n| *n <= hi)).collect()
        }
        None => s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(one)
            .collect::<Result<Vec<_>, _>>()?,
    };
    if counts.is_empty() {
        return Err(format!(
            "no {what} given: expected e.g. 2,8 or a range 2..1024"
        ));
    }
    Ok(counts)
}

/// Prints a size the way it was likely written: `4K`, `1M`, `1536`.
pub fn format_size(b: usize) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_sizes("64K,1M").unwrap(), vec![64 << 10, 1 << 20]);
        assert_eq!(
            parse_sizes("4K..32K").unwrap(),
            vec![4096, 8192, 16384, 32768]
        );
        assert_eq!(parse_sizes("1M..1M").unwrap(), vec![1 << 20]);
        assert!(parse_sizes("8K..4K")
            .unwrap_err()
            .contains("larger than its end"));
        assert!(parse_size("4Q").unwrap_err().contains("not a size"));
        assert!(parse_size("0").is_err());
        assert!(parse_sizes("").unwrap_err().contains("no sizes given"));
        assert!(parse_sizes(" , ").unwrap_err().contains("no sizes given"));
        assert!(parse_size("16777216T").is_err());
        assert!(parse_size("9007199254740992G")
            .unwrap_err()
            .contains("at most"));
        assert_eq!(parse_counts("2..9", "count", 16).unwrap(), vec![2, 4, 8]);
        assert_eq!(parse_counts("3, 5", "count", 16).unwrap(), vec![3, 5]);
        for bad in ["0", "17", "1K", "", "4..2", "18446744073709551616"] {
            assert!(parse_counts(bad, "count", 16).is_err(), "{bad}");
        }
        assert_eq!(format_size(64 << 20), "64M");
        assert_eq!(format_size(1536), "1536");
    }
}
