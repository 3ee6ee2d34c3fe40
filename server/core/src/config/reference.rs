//! The settings reference (the table in docs/configuration.md), rendered from the declaration:
//! each setting's TOML key, flag and variable (as clap has them), default and help line.

use clap::Args;

use super::ConfigArgs;
use super::settings::setting_list;

/// Every setting as a Markdown table: TOML key, flag, environment variable, default, meaning.
pub fn reference_table() -> String {
    let cmd = ConfigArgs::augment_args(clap::Command::new("vidforge"));
    let mut out = String::from(
        "| setting (TOML key) | flag | environment | default | what |\n|---|---|---|---|---|\n",
    );
    for s in setting_list() {
        let arg = cmd.get_arguments().find(|a| a.get_id() == s.name);
        let code =
            |v: Option<String>| v.map_or_else(|| "file only".to_string(), |v| format!("`{v}`"));
        let flag = code(arg.and_then(|a| a.get_long()).map(|l| format!("--{l}")));
        let env = code(
            arg.and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned()),
        );
        let default = if s.default == "none" {
            s.default
        } else {
            format!("`{}`", s.default)
        };
        let help = s.help.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | {flag} | {env} | {default} | {help} |\n",
            s.name
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::choices::MediaChoice;
    use vidforge_media as media;

    /// The line before the generated table in docs/configuration.md.
    const BEGIN_MARK: &str =
        "<!-- settings table: generated from server/core/src/config/settings.rs, do not edit -->";
    /// The line after it.
    const END_MARK: &str = "<!-- end of settings table -->";
    const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");

    /// docs/configuration.md carries the table rendered from the declaration, between the
    /// marks. `VIDFORGE_BLESS=1` rewrites it there.
    #[test]
    fn docs_carry_the_generated_settings_table() {
        let doc = std::fs::read_to_string(DOC).expect("docs/configuration.md");
        let table = reference_table();
        let (Some(begin), Some(end)) = (doc.find(BEGIN_MARK), doc.find(END_MARK)) else {
            panic!("{DOC} lacks the marks `{BEGIN_MARK}` and `{END_MARK}`");
        };
        let body_start = begin + BEGIN_MARK.len() + 1;
        let current = doc.get(body_start..end).unwrap_or_default();
        if current == table {
            return;
        }
        if std::env::var("VIDFORGE_BLESS").is_ok_and(|v| v == "1") {
            let updated = format!("{}{table}{}", &doc[..body_start], &doc[end..]);
            std::fs::write(DOC, updated).expect("rewrite docs/configuration.md");
            return;
        }
        panic!(
            "the settings table in {DOC} is stale; rerun with VIDFORGE_BLESS=1 to rewrite it. \
             Expected:\n{table}"
        );
    }

    /// Every setting with a flag reads `VIDFORGE_<NAME>`.
    #[test]
    fn every_variable_is_vidforge_and_the_name() {
        let cmd = ConfigArgs::augment_args(clap::Command::new("vidforge"));
        for s in setting_list() {
            let Some(arg) = cmd.get_arguments().find(|a| a.get_id() == s.name) else {
                continue;
            };
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            let expected = format!("VIDFORGE_{}", s.name.to_ascii_uppercase());
            assert_eq!(env.as_deref(), Some(expected.as_str()), "{}", s.name);
        }
    }

    /// Every media choice is listed, and found again by the engine's own name for it.
    #[test]
    fn media_choice_names_match_the_engine() {
        fn check<E: MediaChoice + PartialEq + std::fmt::Debug>(all: &[E]) {
            assert_eq!(E::CHOICES.len(), all.len());
            for (c, _) in E::CHOICES {
                assert_eq!(E::named(c.name()), Some(*c));
                assert!(all.contains(c), "{c:?}");
            }
        }
        check(&[
            media::BackendChoice::Auto,
            media::BackendChoice::Wgpu,
            media::BackendChoice::Cpu,
        ]);
        check(&media::HwDecodeChoice::ALL);
        check(&media::EncoderChoice::ALL);
        check(&media::ZeroCopyChoice::ALL);
        check(&crate::config::Speculative::ALL);
        check(&crate::config::Fanout::ALL);
    }
}
