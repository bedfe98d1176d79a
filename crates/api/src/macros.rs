//! `string_enum!`: a closed set of strings with exact wire spellings.

/// Declares a unit enum whose variants serialize to exactly the given strings, with `ALL`,
/// `as_str`, `Display` and `FromStr` (which fails with [`crate::Error::UnknownValue`]).
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize, schemars::JsonSchema,
        )]
        $vis enum $name {
            $( $(#[$vmeta])* #[serde(rename = $wire)] $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The exact wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err($crate::Error::UnknownValue {
                        what: stringify!($name),
                        value: s.to_string(),
                        expected: [$($wire),+].join(", "),
                    }),
                }
            }
        }
    };
}

pub(crate) use string_enum;

/// The serde impls of a spec that may be absent from the object: Deckhouse's schema of its kind
/// does not require `spec`, and the derived root struct would refuse an object without one. The
/// spec derives `Serialize`/`Deserialize` with `#[serde(remote = "Self")]` (inherent functions);
/// these trait impls call them, decoding a missing or `null` spec as the default.
macro_rules! spec_may_be_absent {
    ($spec:ty) => {
        impl ::serde::Serialize for $spec {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$spec>::serialize(self, serializer)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $spec {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                struct Present($spec);
                impl<'de> ::serde::Deserialize<'de> for Present {
                    fn deserialize<D: ::serde::Deserializer<'de>>(
                        deserializer: D,
                    ) -> Result<Self, D::Error> {
                        <$spec>::deserialize(deserializer).map(Present)
                    }
                }
                // A field the object lacks reaches here as `deserialize_option` → none.
                Ok(
                    <Option<Present> as ::serde::Deserialize>::deserialize(deserializer)?
                        .map(|p| p.0)
                        .unwrap_or_default(),
                )
            }
        }
    };
}

pub(crate) use spec_may_be_absent;
