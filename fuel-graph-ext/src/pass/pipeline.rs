//! Pipeline strings: `a,b{key=value, k2=v2},c`.

use super::PassError;
use std::collections::BTreeMap;

/// One pass in a pipeline, with its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineEntry {
    /// The pass name.
    pub name: String,
    /// Its options.
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Display for PipelineEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if !self.options.is_empty() {
            let kv: Vec<String> = self
                .options
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            write!(f, "{{{}}}", kv.join(", "))?;
        }
        Ok(())
    }
}

/// Parses a pipeline string. An empty string is an empty pipeline.
pub fn parse_pipeline(text: &str) -> Result<Vec<PipelineEntry>, PassError> {
    let err = |message: String| PassError::Pipeline {
        pipeline: text.to_string(),
        message,
    };
    let mut entries = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let end = rest.find([',', '{']).unwrap_or(rest.len());
        let name = rest[..end].trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(err(format!(
                "expected a kebab-case pass name, found `{name}`"
            )));
        }
        let mut options = BTreeMap::new();
        rest = &rest[end..];
        if let Some(body_start) = rest.strip_prefix('{') {
            let close = body_start
                .find('}')
                .ok_or_else(|| err(format!("`{name}{{` has no closing `}}`")))?;
            for kv in body_start[..close]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                let (k, v) = kv.split_once('=').ok_or_else(|| {
                    err(format!(
                        "expected `key=value` in the options of `{name}`, found `{kv}`"
                    ))
                })?;
                let (k, v) = (k.trim(), v.trim());
                if k.is_empty() || v.is_empty() {
                    return Err(err(format!(
                        "expected `key=value` in the options of `{name}`, found `{kv}`"
                    )));
                }
                if options.insert(k.to_string(), v.to_string()).is_some() {
                    return Err(err(format!("option `{k}` is given twice for `{name}`")));
                }
            }
            rest = &body_start[close + 1..];
        }
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
            if rest.is_empty() {
                return Err(err("expected a pass name after the last `,`".into()));
            }
        } else if !rest.is_empty() {
            return Err(err(format!("expected `,` after `{name}`, found `{rest}`")));
        }
        entries.push(PipelineEntry {
            name: name.to_string(),
            options,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_options() {
        let p = parse_pipeline("a-b, c{x=1, y=cpu:0},d").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].options.get("y").map(String::as_str), Some("cpu:0"));
        assert_eq!(p[1].to_string(), "c{x=1, y=cpu:0}");
        assert!(parse_pipeline("").unwrap().is_empty());
        for bad in ["a,", "a{x}", "a{x=1", "A", "a b", "a{x=1,x=2}"] {
            assert!(parse_pipeline(bad).is_err(), "{bad}");
        }
    }
}
