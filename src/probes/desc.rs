//! Probe descriptions: `provider:module:function:name` with fewer fields filled from the right.

use std::fmt;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProbeDesc {
    pub provider: String,
    pub module: String,
    pub function: String,
    pub name: String,
}

impl ProbeDesc {
    /// Parses a description. One field is a name, two are `function:name`, three are
    /// `module:function:name`. More than four fields is an error.
    pub fn parse(text: &str) -> Result<ProbeDesc, String> {
        let parts = split_fields(text);
        if parts.len() > 4 {
            return Err(format!(
                "invalid probe description \"{text}\": Overspecified probe description"
            ));
        }
        let mut f = vec![String::new(); 4 - parts.len()];
        f.extend(parts);
        Ok(ProbeDesc {
            provider: f[0].clone(),
            module: f[1].clone(),
            function: f[2].clone(),
            name: f[3].clone(),
        })
    }

    /// True when no field has glob characters.
    pub fn is_exact(&self) -> bool {
        [&self.provider, &self.module, &self.function, &self.name]
            .iter()
            .all(|f| !f.contains(['*', '?', '[']))
    }
}

/// Splits at `:` except inside `[...]` (a glob class may contain a colon) and after `\`.
fn split_fields(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut in_class = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '[' => {
                in_class = true;
                cur.push(c);
            }
            ']' => {
                in_class = false;
                cur.push(c);
            }
            ':' if !in_class => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
}

impl fmt::Display for ProbeDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.provider, self.module, self.function, self.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_fill_from_the_right() {
        let d = ProbeDesc::parse("BEGIN").unwrap();
        assert_eq!((d.provider.as_str(), d.name.as_str()), ("", "BEGIN"));
        let d = ProbeDesc::parse("syscall::read:entry").unwrap();
        assert_eq!(d.to_string(), "syscall::read:entry");
        let d = ProbeDesc::parse("f:n").unwrap();
        assert_eq!((d.function.as_str(), d.name.as_str()), ("f", "n"));
        assert!(ProbeDesc::parse("a:b:c:d:e").is_err());
        let d = ProbeDesc::parse("p:m:f[:x]:n").unwrap();
        assert_eq!(d.function, "f[:x]");
    }
}
