//! [`enum_names!`]: the one way the workspace gives a field-less enum its names. A crate of its
//! own with no dependencies, under every other one, so all of them can use it.

/// The name table of a field-less enum, from one list of its variants and their names:
/// `ALL` (every variant, in the list's order), `as_str` (the variant's name), `from_name`
/// (the variant named exactly so) and `from_any_case` (for people typing: any case, spaces
/// around it ignored).
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// enum Fruit { Apple, Pear }
/// vidforge_names::enum_names!(Fruit { Apple => "apple", Pear => "pear" });
/// assert_eq!(Fruit::ALL, [Fruit::Apple, Fruit::Pear]);
/// assert_eq!(Fruit::Pear.as_str(), "pear");
/// assert_eq!(Fruit::from_name("apple"), Some(Fruit::Apple));
/// assert_eq!(Fruit::from_name("Apple"), None);
/// assert_eq!(Fruit::from_any_case(" Apple "), Some(Fruit::Apple));
/// ```
#[macro_export]
macro_rules! enum_names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in order.
            pub const ALL: [$ty; $crate::enum_names!(@count $($variant)+)] = [$($ty::$variant),+];

            /// Its name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }

            /// The variant named exactly `s`.
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }

            /// The variant named `s` in any case, spaces around it ignored.
            pub fn from_any_case(s: &str) -> Option<Self> {
                let s = s.trim();
                Self::ALL.into_iter().find(|v| v.as_str().eq_ignore_ascii_case(s))
            }
        }
    };
    (@count) => { 0usize };
    (@count $head:ident $($tail:ident)*) => { 1usize + $crate::enum_names!(@count $($tail)*) };
}
