//! The NVENC probe's answer, kept per driver so that a one-shot `vidforge render` does not pay
//! for opening an encoder session (0.6–0.7 s on the H200 host) on every start: the answer
//! changes only with the driver or the cards, which are the key. The service probes afresh at
//! boot and refreshes the file.
//!
//! The file (`$VIDFORGE_HARDWARE_CACHE`, else `$XDG_CACHE_HOME/vidforge/hardware`, else
//! `~/.cache/vidforge/hardware`; `VIDFORGE_HARDWARE_CACHE=off` disables it) is three lines of
//! text, written whole under a temporary name and renamed. Anything unreadable, of another
//! format or of another key is a miss, never an error: the probe then simply runs.

use std::path::{Path, PathBuf};

/// The first line of the file.
const MAGIC: &str = "vidforge-hardware-cache 1";

/// Where the file lives, or `None` when caching is off or there is no home.
pub(crate) fn location() -> Option<PathBuf> {
    location_from(|k| std::env::var_os(k))
}

fn location_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(explicit) = var("VIDFORGE_HARDWARE_CACHE") {
        return (explicit != "off" && !explicit.is_empty()).then(|| PathBuf::from(explicit));
    }
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("vidforge").join("hardware"))
}

/// What identifies the driver and the cards: the driver's version line and each card's model
/// (`/proc/driver/nvidia`), with this build's version. `None` when unreadable: no caching.
pub(crate) fn driver_key() -> Option<String> {
    let version = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    let mut cards: Vec<String> = std::fs::read_dir("/proc/driver/nvidia/gpus")
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("information")).ok())
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("Model:") || l.starts_with("Bus Location:"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    cards.sort();
    let line = format!(
        "vidforge {} | {} | {}",
        env!("CARGO_PKG_VERSION"),
        version.lines().next().unwrap_or(""),
        cards.join(" / ")
    );
    Some(line.replace(['\n', '\r'], " "))
}

/// The cached NVENC answer for `key`, if the file holds one.
pub(crate) fn read(path: &Path, key: &str) -> Option<Result<(), String>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    if lines.next()? != MAGIC || lines.next()? != key {
        return None;
    }
    match lines.next()? {
        "nvenc ok" => Some(Ok(())),
        l => l.strip_prefix("nvenc no ").map(|why| Err(why.to_string())),
    }
}

/// Records `answer` for `key`; failures (a read-only home) are logged and ignored.
pub(crate) fn write(path: &Path, key: &str, answer: &Result<(), String>) {
    let body = match answer {
        Ok(()) => "nvenc ok".to_string(),
        Err(why) => format!("nvenc no {}", why.replace(['\n', '\r'], " ")),
    };
    let text = format!("{MAGIC}\n{key}\n{body}\n");
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!(path = %path.display(), "hardware cache not written: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip_per_key_and_anything_else_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/hardware");
        assert_eq!(read(&path, "k"), None, "no file");
        write(&path, "k", &Ok(()));
        assert_eq!(read(&path, "k"), Some(Ok(())));
        assert_eq!(read(&path, "other driver"), None);
        write(&path, "k", &Err("no NVENC\non this card".into()));
        assert_eq!(read(&path, "k"), Some(Err("no NVENC on this card".into())));
        std::fs::write(&path, "garbage\nk\nnvenc ok\n").unwrap();
        assert_eq!(read(&path, "k"), None);
        std::fs::write(&path, format!("{MAGIC}\nk\nnvenc maybe\n")).unwrap();
        assert_eq!(read(&path, "k"), None);
        // An unwritable place is ignored.
        write(Path::new("/proc/vidforge-no/hardware"), "k", &Ok(()));
    }

    #[test]
    fn the_location_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
        };
        assert_eq!(
            location_from(env(&[("VIDFORGE_HARDWARE_CACHE", "off")])),
            None
        );
        assert_eq!(
            location_from(env(&[("VIDFORGE_HARDWARE_CACHE", "/x/y"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/y"))
        );
        assert_eq!(
            location_from(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")])),
            Some(PathBuf::from("/c/vidforge/hardware"))
        );
        assert_eq!(
            location_from(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/vidforge/hardware"))
        );
        assert_eq!(location_from(env(&[])), None);
    }
}
