//! The `deckhouse` ModuleConfig's settings the controller itself acts on: `logLevel` (`Trace`,
//! `Debug`, `Info`, `Error`; `Info` by default) and `bundle` (`Default`, `Minimal`, `Managed`;
//! `Default` by default). The schema refuses other words; here an absent or unknown word is the
//! default, so the controller always has an answer.

use serde_json::Value;

/// `logLevel`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogLevel {
    /// `Trace`.
    Trace,
    /// `Debug`.
    Debug,
    /// `Info`.
    #[default]
    Info,
    /// `Error`.
    Error,
}

impl LogLevel {
    /// The word in the settings.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "Trace",
            LogLevel::Debug => "Debug",
            LogLevel::Info => "Info",
            LogLevel::Error => "Error",
        }
    }

    /// The `tracing` filter directive for the level (`trace`, `debug`, `info`, `error`).
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Error => "error",
        }
    }

    /// Parses the word of the settings (`None` for any other).
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "Trace" => LogLevel::Trace,
            "Debug" => LogLevel::Debug,
            "Info" => LogLevel::Info,
            "Error" => LogLevel::Error,
            _ => return None,
        })
    }
}

/// `bundle`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bundle {
    /// `Default`.
    #[default]
    Default,
    /// `Minimal`.
    Minimal,
    /// `Managed`.
    Managed,
}

impl Bundle {
    /// The word in the settings (what the enabling chain's `Facts::bundle` takes).
    pub fn as_str(self) -> &'static str {
        match self {
            Bundle::Default => "Default",
            Bundle::Minimal => "Minimal",
            Bundle::Managed => "Managed",
        }
    }

    /// Parses the word of the settings (`None` for any other).
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "Default" => Bundle::Default,
            "Minimal" => Bundle::Minimal,
            "Managed" => Bundle::Managed,
            _ => return None,
        })
    }
}

/// What the controller takes from the `deckhouse` ModuleConfig.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeckhouseSettings {
    /// `logLevel`.
    pub log_level: LogLevel,
    /// `bundle`.
    pub bundle: Bundle,
}

impl DeckhouseSettings {
    /// From the ModuleConfig's `spec.settings` (or the module's values) when there are any.
    pub fn from_settings(settings: Option<&Value>) -> Self {
        let word = |key: &str| settings.and_then(|s| s.get(key)).and_then(Value::as_str);
        Self {
            log_level: word("logLevel")
                .and_then(LogLevel::parse)
                .unwrap_or_default(),
            bundle: word("bundle").and_then(Bundle::parse).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn settings_table() {
        for (settings, log_level, bundle) in [
            (None, LogLevel::Info, Bundle::Default),
            (Some(json!({})), LogLevel::Info, Bundle::Default),
            (
                Some(json!({"logLevel": "Debug", "bundle": "Minimal"})),
                LogLevel::Debug,
                Bundle::Minimal,
            ),
            (
                Some(json!({"logLevel": "Trace", "bundle": "Managed"})),
                LogLevel::Trace,
                Bundle::Managed,
            ),
            (
                Some(json!({"logLevel": "Error"})),
                LogLevel::Error,
                Bundle::Default,
            ),
            // Unknown words (refused by the schema anyway) fall back to the defaults.
            (
                Some(json!({"logLevel": "debug", "bundle": 3})),
                LogLevel::Info,
                Bundle::Default,
            ),
        ] {
            let got = DeckhouseSettings::from_settings(settings.as_ref());
            assert_eq!(got, DeckhouseSettings { log_level, bundle }, "{settings:?}");
        }
        assert_eq!(LogLevel::Debug.directive(), "debug");
        assert_eq!(Bundle::Minimal.as_str(), "Minimal");
    }
}
