//! Writing a downloaded PDB into local symbol stores: the store layout
//! (`store/name.pdb/<GUID><age>/name.pdb`), a temporary file in the store renamed into place
//! once whole and checked (so no reader, this run or a later one, ever sees a partial or wrong
//! file there), and the per-user cache a `srv*server` with no cache of its own gets.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::symbols::pdb::PdbId;

/// Where `id`'s PDB lies in the store `store`.
pub fn place(store: &Path, id: &PdbId) -> PathBuf {
    let name = id.file_name();
    store.join(name).join(id.store_key()).join(name)
}

/// [`place`], for writing: every component under the store a plain name, so that no name
/// (`..`, `C:x`, a root, a device) writes outside it.
pub fn checked_place(store: &Path, id: &PdbId) -> Result<PathBuf, String> {
    let name = id.file_name();
    if let Some(why) = super::guard::file_name_problem(name) {
        return Err(format!(
            "the PDB name {:?}: {why}",
            super::guard::shown(name)
        ));
    }
    let to = place(store, id);
    let under = to
        .strip_prefix(store)
        .map_err(|_| "a path outside the store")?;
    if !under
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(format!(
            "the PDB name {:?}: not a plain name",
            super::guard::shown(name)
        ));
    }
    Ok(to)
}

/// The per-user symbol cache: `%LOCALAPPDATA%\dtx\symbols` on Windows,
/// `~/Library/Caches/dtx/symbols` on macOS, `$XDG_CACHE_HOME/dtx/symbols` (else
/// `~/.cache/dtx/symbols`) elsewhere. None when the environment names no home.
pub fn default_dir() -> Option<PathBuf> {
    let var = |v: &str| {
        std::env::var_os(v)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    };
    let base = if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library").join("Caches"))
    } else {
        var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))
    }?;
    Some(base.join("dtx").join("symbols"))
}

/// A file being written in a store, removed unless [`Partial::keep`] renames it into place.
pub struct Partial {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// What writes go to once the file is closed.
    closed: std::io::Sink,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Partial {
    /// A new temporary file at the top of `store` (made when missing), named so that no lookup
    /// takes it for a symbol file.
    pub fn new(store: &Path) -> Result<Partial, String> {
        std::fs::create_dir_all(store).map_err(|e| format!("{}: {e}", store.display()))?;
        sweep_once(store);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = store.join(format!(".dtx-{}-{n}.partial", std::process::id()));
        let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Partial {
            path,
            file: Some(file),
            closed: std::io::sink(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&mut self) -> &mut dyn std::io::Write {
        match &mut self.file {
            Some(f) => f,
            None => &mut self.closed,
        }
    }

    /// Checks the whole file: a PDB whose GUID or age is not `id`'s is refused (and removed).
    pub fn check(&mut self, id: &PdbId) -> Result<(), String> {
        if let Some(f) = self.file.take() {
            f.sync_all()
                .map_err(|e| format!("{}: {e}", self.path.display()))?;
        }
        // the structure first, with its reason (a stream that claims more than the file holds is
        // refused before pdb2 would allocate it), then the identity
        let f =
            std::fs::File::open(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        crate::symbols::msf::check(&f)?;
        drop(f);
        let (guid, age) = crate::symbols::pdb::pdb_identity(&self.path)
            .map_err(|_| "not a PDB file".to_string())?;
        if guid != id.guid || age != id.age {
            let got = PdbId {
                guid,
                age,
                path: String::new(),
            };
            return Err(format!(
                "a PDB of another build ({}, the image wants {}): refused",
                got.store_key(),
                id.store_key()
            ));
        }
        Ok(())
    }

    /// Renames the (checked) file to `id`'s place in `store` (the store it was made in).
    pub fn keep(mut self, store: &Path, id: &PdbId) -> Result<PathBuf, String> {
        self.file.take();
        let to = checked_place(store, id)?;
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::rename(&self.path, &to).map_err(|e| format!("{}: {e}", to.display()))?;
        Ok(to)
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        self.file.take();
        // gone already when kept
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes, once per store per run, the partial files of runs that ended without removing
/// them (killed mid-download): see [`stale`].
fn sweep_once(store: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    {
        let mut s = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if s.iter().any(|p| p == store) {
            return;
        }
        s.push(store.to_path_buf());
    }
    sweep(store);
}

/// Removes the stale partial files at the top of `store`; how many.
pub fn sweep(store: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(store) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = partial_pid(&name.to_string_lossy()) else {
            continue;
        };
        let age = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .unwrap_or_default();
        if stale(pid, age) && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// The process id in a partial file's name (`.dtx-<pid>-<n>.partial`).
fn partial_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(".dtx-")?.strip_suffix(".partial")?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Whether a partial file of process `pid`, last written `age` ago, is left over: on Linux
/// when that process is gone, anywhere when nothing has written it for longer than a download
/// may take (a live download writes as bytes arrive).
fn stale(pid: u32, age: std::time::Duration) -> bool {
    if pid == std::process::id() {
        return false;
    }
    let quiet =
        age > super::guard::Limits::from_env().download + std::time::Duration::from_secs(60);
    #[cfg(target_os = "linux")]
    {
        quiet || !Path::new(&format!("/proc/{pid}")).exists()
    }
    #[cfg(not(target_os = "linux"))]
    {
        quiet
    }
}

/// Copies the PDB at `from` into `id`'s place in `store`, through a temporary file there.
pub fn copy_into(store: &Path, id: &PdbId, from: &Path) -> Result<PathBuf, String> {
    let to = checked_place(store, id)?;
    if to.is_file() {
        return Ok(to);
    }
    let mut part = Partial::new(store)?;
    let src = std::fs::File::open(from).map_err(|e| format!("{}: {e}", from.display()))?;
    if !src.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("{}: not a file", from.display()));
    }
    let max = super::guard::Limits::from_env().max_bytes;
    let n = std::io::copy(&mut src.take(max + 1), part.file())
        .map_err(|e| format!("{}: {e}", store.display()))?;
    if n > max {
        return Err(format!(
            "{}: larger than {max} bytes (DTX_SYMBOL_MAX_MB): refused",
            from.display()
        ));
    }
    part.check(id)?;
    part.keep(store, id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_partials_of_dead_runs_are_swept() {
        let d = tempfile::tempdir().unwrap();
        // pid 0x7fffffff is no process; ours is alive
        let dead = d.path().join(".dtx-2147483647-0.partial");
        let ours = d
            .path()
            .join(format!(".dtx-{}-9.partial", std::process::id()));
        let other = d.path().join("x.dtx-1-0.partial.keep");
        for p in [&dead, &ours, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        let n = sweep(d.path());
        assert!(ours.exists() && other.exists());
        if cfg!(target_os = "linux") {
            assert_eq!(n, 1);
            assert!(!dead.exists());
        }
        assert_eq!(partial_pid(".dtx-12-3.partial"), Some(12));
        assert_eq!(partial_pid(".dtx-12.partial"), None);
        assert!(stale(2147483647, std::time::Duration::from_secs(1 << 20)));
        assert!(!stale(
            std::process::id(),
            std::time::Duration::from_secs(1 << 20)
        ));
    }
}
