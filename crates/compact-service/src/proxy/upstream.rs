//! Where a request goes: the upstream of the longest path prefix of
//! `proxy.upstreams` that matches, else `proxy.upstream`
//! (docs/configuration.md, `proxy`).

use reqwest::Url;

/// One upstream: its origin, the path every request goes under, and the
/// label spans and errors show (never credentials).
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    base: Url,
    /// `https://api.openai.com`: scheme, host and port only.
    pub(crate) label: String,
}

impl Upstream {
    /// `url` (`https://api.openai.com`, `https://api.openai.com/v1`).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let mut base = Url::parse(url.trim()).map_err(|e| format!("{url:?}: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(format!("{url:?}: expected an http:// or https:// URL"));
        }
        base.set_query(None);
        base.set_fragment(None);
        let label = match base.port() {
            Some(port) => format!(
                "{}://{}:{port}",
                base.scheme(),
                base.host_str().unwrap_or_default()
            ),
            None => format!(
                "{}://{}",
                base.scheme(),
                base.host_str().unwrap_or_default()
            ),
        };
        Ok(Self { base, label })
    }

    /// The URL of `rest` (a path starting with `/`) and `query` on this
    /// upstream. A base path ending in `/v1` takes `/v1/...` without
    /// repeating it.
    pub(crate) fn url(&self, rest: &str, query: Option<&str>) -> Url {
        let base_path = self.base.path().trim_end_matches('/');
        let rest = match rest.strip_prefix("/v1") {
            Some(tail)
                if base_path.ends_with("/v1") && (tail.is_empty() || tail.starts_with('/')) =>
            {
                tail
            }
            _ => rest,
        };
        let mut url = self.base.clone();
        url.set_path(&format!("{base_path}{rest}"));
        url.set_query(query);
        url
    }
}

/// The table of upstreams.
#[derive(Debug, Clone, Default)]
pub(crate) struct Upstreams {
    /// By prefix, longest first.
    prefixed: Vec<(String, Upstream)>,
    fallback: Option<Upstream>,
}

impl Upstreams {
    pub(crate) fn new(
        fallback: Option<&str>,
        prefixed: &[(String, String)],
    ) -> Result<Self, String> {
        let fallback = fallback.map(Upstream::parse).transpose()?;
        let mut table = prefixed
            .iter()
            .map(|(prefix, url)| Ok((prefix.clone(), Upstream::parse(url)?)))
            .collect::<Result<Vec<_>, String>>()?;
        table.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        if fallback.is_none() && table.is_empty() {
            return Err(
                "no upstream: pass --upstream URL or set proxy.upstream or proxy.upstreams".into(),
            );
        }
        Ok(Self {
            prefixed: table,
            fallback,
        })
    }

    /// The upstream of `path` and the path it forwards (the prefix removed).
    pub(crate) fn route<'a>(&self, path: &'a str) -> Option<(&Upstream, &'a str)> {
        for (prefix, upstream) in &self.prefixed {
            if let Some(rest) = path.strip_prefix(prefix.as_str())
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return Some((upstream, rest));
            }
        }
        self.fallback.as_ref().map(|u| (u, path))
    }

    /// Every upstream's label, for the start-up line.
    pub(crate) fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .prefixed
            .iter()
            .map(|(p, u)| format!("{p} -> {}", u.label))
            .collect();
        if let Some(u) = &self.fallback {
            parts.push(format!("* -> {}", u.label));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_without_a_second_v1() {
        let u = Upstream::parse("https://api.openai.com/v1/").unwrap();
        assert_eq!(
            u.url("/v1/chat/completions", None).as_str(),
            "https://api.openai.com/v1/chat/completions"
        );
        let u = Upstream::parse("http://127.0.0.1:9/base").unwrap();
        assert_eq!(
            u.url("/v1/models", Some("a=1")).as_str(),
            "http://127.0.0.1:9/base/v1/models?a=1"
        );
        assert_eq!(u.label, "http://127.0.0.1:9");
        let u = Upstream::parse("https://user:secret@api.example.com").unwrap();
        assert_eq!(u.label, "https://api.example.com");
        assert!(Upstream::parse("ftp://x").is_err());
    }

    #[test]
    fn the_longest_prefix_wins_and_is_removed() {
        let table = Upstreams::new(
            Some("https://api.openai.com"),
            &[
                ("/anthropic".into(), "https://api.anthropic.com".into()),
                ("/anthropic/beta".into(), "http://127.0.0.1:1".into()),
            ],
        )
        .unwrap();
        let (u, rest) = table.route("/anthropic/v1/messages").unwrap();
        assert_eq!(
            (u.label.as_str(), rest),
            ("https://api.anthropic.com", "/v1/messages")
        );
        let (u, rest) = table.route("/anthropic/beta/v1/messages").unwrap();
        assert_eq!(
            (u.label.as_str(), rest),
            ("http://127.0.0.1:1", "/v1/messages")
        );
        let (u, rest) = table.route("/anthropicx/v1/messages").unwrap();
        assert_eq!(
            (u.label.as_str(), rest),
            ("https://api.openai.com", "/anthropicx/v1/messages")
        );
        assert!(Upstreams::new(None, &[]).is_err());
        let only = Upstreams::new(None, &[("/a".into(), "http://h".into())]).unwrap();
        assert!(only.route("/v1/models").is_none());
    }
}
