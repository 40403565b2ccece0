//! The traces of `-E`: each `-E` names a file, a glob (`runs/*.etl`, `day?/[ab]*.etl`), a zip
//! archive (every `.etl` member of it; an archive of one trace keeps its name) or one member (`x.zip:member.etl`, the member part may be
//! a glob too). The expansion is the list a many-trace run walks, in the order given (a glob's
//! and an archive's matches sorted by name).

use std::path::{Path, PathBuf};

/// Whether a path component holds wildcard characters.
fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Every trace the `-E` arguments name, in order. A glob that matches nothing, an archive with
/// no `.etl` member, or a file that does not exist is an error naming it (a single `-E` of a
/// missing file is the caller's case: on Windows it traces live into that file).
pub fn expand(specs: &[PathBuf]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for spec in specs {
        let spec = spec.to_string_lossy().into_owned();
        let (path, member) = match crate::etw::reader::split_member(&spec) {
            (a, Some(m)) => (a.to_string(), Some(m.to_string())),
            (a, None) => (a.to_string(), None),
        };
        let files = if has_wildcard(&path) {
            let found = glob(&path);
            if found.is_empty() {
                return Err(format!("{path}: no file matches"));
            }
            found
        } else {
            vec![path]
        };
        for file in files {
            let is_zip = file.to_ascii_lowercase().ends_with(".zip");
            match &member {
                Some(m) if !has_wildcard(m) => out.push(format!("{file}:{m}")),
                _ if is_zip || member.is_some() => {
                    let pattern = member.as_deref().unwrap_or("*");
                    let mut names =
                        crate::etw::reader::zip_etl_members(&file).map_err(|e| e.to_string())?;
                    names.retain(|n| crate::probes::glob_match(pattern, n));
                    if names.is_empty() {
                        return Err(format!("{file}: no .etl member matches {pattern}"));
                    }
                    if member.is_none() && names.len() == 1 {
                        // an archive of one trace is named as given, as a single -E names it
                        out.push(file);
                        continue;
                    }
                    out.extend(names.into_iter().map(|n| format!("{file}:{n}")));
                }
                _ => out.push(file),
            }
        }
    }
    Ok(out)
}

/// The files a glob matches (wildcards in any component), sorted; directories are walked only
/// where a component has a wildcard.
fn glob(pattern: &str) -> Vec<String> {
    let p = Path::new(pattern);
    let mut bases = vec![PathBuf::new()];
    let components: Vec<_> = p.components().collect();
    for (i, c) in components.iter().enumerate() {
        let last = i + 1 == components.len();
        let text = c.as_os_str().to_string_lossy();
        let mut next = Vec::new();
        for base in &bases {
            if !has_wildcard(&text) {
                let joined = base.join(c.as_os_str());
                if last && !joined.is_file() {
                    continue;
                }
                next.push(joined);
                continue;
            }
            let dir = if base.as_os_str().is_empty() {
                Path::new(".")
            } else {
                base.as_path()
            };
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.') && crate::probes::glob_match(&text, n))
                .collect();
            names.sort();
            for n in names {
                let joined = base.join(&n);
                if (last && joined.is_file()) || (!last && joined.is_dir()) {
                    next.push(joined);
                }
            }
        }
        bases = next;
    }
    bases
        .into_iter()
        .map(|b| b.to_string_lossy().into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_expand_sorted_and_refuse_no_match() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["b.etl", "a.etl", "c.txt"] {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/d.etl"), b"x").unwrap();
        let d = dir.path().display();
        // matches are joined with the platform's separator (`\\` on Windows)
        let at = |rel: &str| {
            rel.split('/')
                .fold(dir.path().to_path_buf(), |p, c| p.join(c))
                .display()
                .to_string()
        };
        let got = expand(&[PathBuf::from(format!("{d}/*.etl"))]).unwrap();
        assert_eq!(got, [at("a.etl"), at("b.etl")]);
        let got = expand(&[PathBuf::from(format!("{d}/s*/?.etl"))]).unwrap();
        assert_eq!(got, [at("sub/d.etl")]);
        // a plain name stays as given, existing or not
        let got = expand(&[PathBuf::from("x.etl"), PathBuf::from(format!("{d}/[c]*"))]).unwrap();
        assert_eq!(got, ["x.etl".to_string(), at("c.txt")]);
        assert!(expand(&[PathBuf::from(format!("{d}/*.zzz"))])
            .unwrap_err()
            .contains("no file matches"));
    }
}
