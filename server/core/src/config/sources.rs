//! Where configuration comes from, generated from the one declaration of each setting
//! (`settings.rs`): the [`Config`](super::Config) struct and its defaults, the command-line flags
//! (each with its `VIDFORGE_*` variable), the TOML file's shape, one merge for both layers, and
//! the list the reference table is rendered from.

/// Declares every setting once. Each entry:
///
/// ```text
/// /// Rustdoc of the Config field.
/// name: Type = default expression, Kind,
///     help: "One line for --help and the reference.",
///     [shown: "the default as the reference states it",]   (when not derived from the value)
///     [flag(clap arg attributes): flag field type,]         (absent: a file-only setting)
/// ;
/// ```
///
/// `Kind` ([`super::kinds`]) says how the flag and the file value become the `Config` value;
/// the TOML key is the name.
macro_rules! declare_settings {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $ty:ty = $default:expr, $kind:ty,
            help: $help:literal
            $(, shown: $shown:literal)?
            $(, flag($($arg:tt)*): $flag_ty:ty)?
        ;
    )*) => {
        /// The resolved configuration.
        #[derive(Clone, Debug)]
        pub struct Config {
            $( $(#[doc = $doc])* pub $name: $ty, )*
        }

        impl Default for Config {
            fn default() -> Self {
                Config { $( $name: $default, )* }
            }
        }

        /// Configuration flags shared by `vidforge serve` and `vidforge assets`; each also reads
        /// a `VIDFORGE_*` environment variable.
        #[derive(Debug, Default, Clone, clap::Args)]
        pub struct ConfigArgs {
            /// TOML configuration file.
            #[arg(long, env = "VIDFORGE_CONFIG")]
            pub config: Option<std::path::PathBuf>,
            $( $( #[doc = $help] #[arg($($arg)*)] pub $name: $flag_ty, )? )*
        }

        /// The TOML file's shape; every key optional, unknown keys refused.
        #[derive(Default, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub(super) struct FileConfig {
            $( $name: <$kind as Kind>::File, )*
        }

        /// One layer of configuration (the file, or the flags and environment): the settings
        /// it sets.
        pub(super) struct Layer {
            $( $name: Option<$ty>, )*
        }

        impl Layer {
            pub(super) fn from_file(f: FileConfig) -> Result<Layer, ConfigError> {
                Ok(Layer {
                    $( $name: <$kind as Kind>::from_file(f.$name, stringify!($name))?, )*
                })
            }

            pub(super) fn from_args(a: &ConfigArgs) -> Result<Layer, ConfigError> {
                Ok(Layer { $( $name: flag_value!(a, $name, $kind $(, $flag_ty)?), )* })
            }

            /// Overrides what this layer sets.
            pub(super) fn apply(self, c: &mut Config) {
                $( if let Some(v) = self.$name { c.$name = v; } )*
            }
        }

        /// Every setting, for the reference table.
        pub(super) fn setting_list() -> Vec<SettingInfo> {
            let d = Config::default();
            vec![$(
                SettingInfo {
                    name: stringify!($name),
                    help: $help,
                    default: shown!(<$kind as Kind>::show(&d.$name) $(, $shown)?),
                },
            )*]
        }
    };
}

/// The flag's value of a setting, `None` for a file-only one.
macro_rules! flag_value {
    ($a:ident, $name:ident, $kind:ty) => {
        None
    };
    ($a:ident, $name:ident, $kind:ty, $flag_ty:ty) => {
        <$kind as Kind>::from_flag(&$a.$name, stringify!($name))?
    };
}

/// The default as the reference shows it: stated, or derived from the value.
macro_rules! shown {
    ($derived:expr) => {
        $derived
    };
    ($derived:expr, $shown:literal) => {
        String::from($shown)
    };
}

pub(super) use {declare_settings, flag_value, shown};

/// One setting as the reference lists it (flag and variable come from clap).
#[derive(Debug)]
pub(super) struct SettingInfo {
    /// The TOML key (and the flag's id).
    pub name: &'static str,
    /// The `--help` line.
    pub help: &'static str,
    /// The default, as shown.
    pub default: String,
}
