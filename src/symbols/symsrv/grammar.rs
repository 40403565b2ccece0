//! dbghelp's symbol path grammar, as Microsoft's "Symbol path for Windows debuggers" and
//! "Using SymSrv" describe it: `;`-separated elements, each a plain folder, a server chain
//! `srv*store*store*...` (also `symsrv*symsrv.dll*store*...`), or `cache*[dir]`. A store of a
//! chain is a folder (a local or network symbol store) or an `http(s)://` server; stores are
//! searched left to right, and a file found further right is copied into the folders to its
//! left (the "downstream" stores). A `cache*dir` element caches what the server elements after
//! it find; a chain whose first store is a server and that no `cache*` precedes gets a per-user
//! cache (see [`super::cache::default_dir`]).

use std::path::PathBuf;

/// One store of a server chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Store {
    Dir(PathBuf),
    Http(String),
}

/// One element of a symbol path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Element {
    /// A plain folder.
    Folder(PathBuf),
    /// `srv*...` / `symsrv*dll*...`: its stores, left to right.
    Chain(Vec<Store>),
    /// `cache*dir` (`cache*` alone: dbghelp's default cache folder, which dtx takes as the
    /// per-user cache).
    Cache(Option<PathBuf>),
}

/// Whether `s` names an HTTP symbol server.
pub fn is_url(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l.starts_with("http://") || l.starts_with("https://")
}

/// The elements of a symbol path, empty ones left out. A `symsrv*` element whose DLL is not
/// symsrv's names a store protocol dtx does not speak: its stores are still searched.
pub fn parse(text: &str) -> Vec<Element> {
    let mut out = Vec::new();
    for el in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = el.split('*').map(str::trim).collect();
        let stores = |list: &[&str]| -> Vec<Store> {
            list.iter()
                .filter(|p| !p.is_empty())
                .map(|p| {
                    if is_url(p) {
                        Store::Http(p.trim_end_matches('/').to_string())
                    } else {
                        Store::Dir(PathBuf::from(p))
                    }
                })
                .collect()
        };
        match parts[0].to_ascii_lowercase().as_str() {
            "srv" if parts.len() > 1 => out.push(Element::Chain(stores(&parts[1..]))),
            "symsrv" if parts.len() > 2 => out.push(Element::Chain(stores(&parts[2..]))),
            "symsrv" | "srv" => {}
            "cache" if parts.len() > 1 => {
                let dir = parts[1..].iter().find(|p| !p.is_empty());
                out.push(Element::Cache(dir.map(PathBuf::from)));
            }
            _ if parts.len() == 1 => out.push(Element::Folder(el.into())),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_caches_and_folders() {
        let e = parse(concat!(
            r"C:\syms; srv*C:\cache*https://msdl.microsoft.com/download/symbols/;;cache*D:\c;",
            r"symsrv*symsrv.dll*E:\store*\\share\s*http://x*https://y;SRV*https://only;cache*",
        ));
        assert_eq!(
            e,
            vec![
                Element::Folder(r"C:\syms".into()),
                Element::Chain(vec![
                    Store::Dir(r"C:\cache".into()),
                    Store::Http("https://msdl.microsoft.com/download/symbols".into())
                ]),
                Element::Cache(Some(r"D:\c".into())),
                Element::Chain(vec![
                    Store::Dir(r"E:\store".into()),
                    Store::Dir(r"\\share\s".into()),
                    Store::Http("http://x".into()),
                    Store::Http("https://y".into()),
                ]),
                Element::Chain(vec![Store::Http("https://only".into())]),
                Element::Cache(None),
            ]
        );
        assert!(parse("srv;symsrv*symsrv.dll;").is_empty());
    }
}
