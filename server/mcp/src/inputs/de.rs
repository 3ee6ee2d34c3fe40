//! A serde [`Deserializer`] over a `serde_json::Value` whose error, [`Misfit`], keeps what
//! serde knows in structure: the dotted path of the culprit and whether it is unknown,
//! missing, of the wrong JSON type or an invalid value. (`serde_json`'s own error is one
//! formatted string.) Object keys are visited unknown ones first, then in the declaring
//! struct's field order, so that of several misfits the one reported is the same one the
//! hand validation before it reported: an unknown property, else the first misfit field.

use std::fmt;

use serde::de::value::{SeqDeserializer, StrDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, Expected, IntoDeserializer, MapAccess, Unexpected, Visitor,
};
use serde_json::{Map, Value};

/// Why a value does not fit its input type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MisfitKind {
    /// A property the closed object does not have; `allowed` are the ones it has.
    Unknown { allowed: &'static [&'static str] },
    /// A required property is absent.
    Missing,
    /// The JSON type is wrong; `expected` is serde's wording of the type wanted (`a string`).
    WrongType { expected: String },
    /// The type is right, the value is not (the reason, worded for the client).
    Invalid(String),
}

/// A value that does not fit its input type, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misfit {
    /// Property names from the top-level object down; empty for the arguments themselves.
    pub path: Vec<String>,
    /// The declared property order of the object at each level of `path` (empty where the
    /// object is not a struct of ours).
    pub orders: Vec<&'static [&'static str]>,
    pub kind: MisfitKind,
}

impl Misfit {
    fn new(kind: MisfitKind) -> Self {
        Misfit {
            path: Vec::new(),
            orders: Vec::new(),
            kind,
        }
    }

    /// The misfit one level up: inside property `key` of an object whose declared property
    /// order is `order`.
    fn at(mut self, key: &str, order: &'static [&'static str]) -> Self {
        self.path.insert(0, key.to_string());
        self.orders.insert(0, order);
        self
    }
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {:?}", self.path.join("."), self.kind)
    }
}

impl std::error::Error for Misfit {}

impl de::Error for Misfit {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Misfit::new(MisfitKind::Invalid(msg.to_string()))
    }

    fn invalid_type(_: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Misfit::new(MisfitKind::WrongType {
            expected: expected.to_string(),
        })
    }

    fn invalid_value(_: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::invalid_type(Unexpected::Other(""), expected)
    }

    fn invalid_length(_: usize, expected: &dyn Expected) -> Self {
        Self::invalid_type(Unexpected::Other(""), expected)
    }

    fn unknown_field(_: &str, allowed: &'static [&'static str]) -> Self {
        // The key itself is added by `Entries::next_key_seed`.
        Misfit::new(MisfitKind::Unknown { allowed })
    }

    fn missing_field(field: &'static str) -> Self {
        Misfit::new(MisfitKind::Missing).at(field, &[])
    }
}

/// Deserializes from a borrowed JSON value with [`Misfit`] errors.
#[derive(Clone, Copy)]
pub struct ValueDeserializer<'a>(pub &'a Value);

impl<'de> IntoDeserializer<'de, Misfit> for ValueDeserializer<'_> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for ValueDeserializer<'_> {
    type Error = Misfit;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Misfit> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => visitor.visit_u64(u),
                (None, Some(i)) => visitor.visit_i64(i),
                (None, None) => visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => visitor.visit_str(s),
            Value::Array(items) => {
                visitor.visit_seq(SeqDeserializer::new(items.iter().map(ValueDeserializer)))
            }
            Value::Object(map) => visitor.visit_map(Entries::new(map, &[])),
        }
    }

    /// `null` is "none"; a property that may be omitted but not `null` deserializes its value
    /// type directly (see `inputs::present`).
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Misfit> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Misfit> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Misfit> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Entries::new(map, fields)),
            _ => self.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// An object's entries: keys not in `fields` first (in the object's order), then `fields`'
/// keys in their order.
struct Entries<'a> {
    entries: std::vec::IntoIter<(&'a str, &'a Value)>,
    pending: Option<(&'a str, &'a Value)>,
    fields: &'static [&'static str],
}

impl<'a> Entries<'a> {
    fn new(map: &'a Map<String, Value>, fields: &'static [&'static str]) -> Self {
        let unknown = map
            .iter()
            .filter(|(k, _)| !fields.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v));
        let known = fields
            .iter()
            .filter_map(|f| map.get_key_value(*f).map(|(k, v)| (k.as_str(), v)));
        Entries {
            entries: unknown.chain(known).collect::<Vec<_>>().into_iter(),
            pending: None,
            fields,
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = Misfit;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Misfit> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some((key, value));
        let key_de: StrDeserializer<'_, Misfit> = key.into_deserializer();
        seed.deserialize(key_de)
            .map(Some)
            .map_err(|e| e.at(key, self.fields))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Misfit> {
        let (key, value) = self
            .pending
            .take()
            .ok_or_else(|| <Misfit as de::Error>::custom("a value without its key"))?;
        seed.deserialize(ValueDeserializer(value))
            .map_err(|e| e.at(key, self.fields))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}
