//! Writes a typed kernel's parameters (`kiln_runtime::typed::params`, which derive
//! `serde::Serialize`) as a Rust constant expression: one generic writer instead of a
//! token function per struct. Type paths are `$rt::typed::params::Name`; `$rt` is
//! replaced by the runtime crate's path when the module is emitted.

use std::fmt::Write;

use serde::ser::{self, Serialize};

/// The expression for `value`.
pub fn to_expr<T: Serialize>(value: &T) -> String {
    let mut w = Writer(String::new());
    // Serializing plain parameter structs cannot fail; the error type exists because
    // serde requires one.
    match value.serialize(&mut w) {
        Ok(()) => w.0,
        Err(e) => format!("compile_error!({:?})", e.0),
    }
}

const PATH: &str = "$rt::typed::params::";

struct Writer(String);

#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

type Res = Result<(), Error>;

fn float(v: f64, ty: &str) -> String {
    if v.is_nan() {
        format!("{ty}::NAN")
    } else if v == f64::INFINITY {
        format!("{ty}::INFINITY")
    } else if v == f64::NEG_INFINITY {
        format!("{ty}::NEG_INFINITY")
    } else {
        format!("{v:?}{ty}")
    }
}

impl Writer {
    fn push(&mut self, s: &str) -> Res {
        self.0.push_str(s);
        Ok(())
    }
}

/// A sequence, tuple or struct body being written.
struct Compound<'a> {
    w: &'a mut Writer,
    first: bool,
    close: &'static str,
}

impl Compound<'_> {
    fn sep(&mut self) {
        if !self.first {
            self.w.0.push_str(", ");
        }
        self.first = false;
    }
}

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Res {
        self.push(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_i16(self, v: i16) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_i32(self, v: i32) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_i64(self, v: i64) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_u8(self, v: u8) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_u16(self, v: u16) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_u32(self, v: u32) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_u64(self, v: u64) -> Res {
        self.push(&format!("{v}"))
    }
    fn serialize_f32(self, v: f32) -> Res {
        let s = if v.is_finite() {
            format!("{v:?}f32")
        } else {
            float(v as f64, "f32")
        };
        self.push(&s)
    }
    fn serialize_f64(self, v: f64) -> Res {
        self.push(&float(v, "f64"))
    }
    fn serialize_char(self, v: char) -> Res {
        self.push(&format!("{v:?}"))
    }
    fn serialize_str(self, v: &str) -> Res {
        self.push(&format!("{v:?}"))
    }
    fn serialize_bytes(self, v: &[u8]) -> Res {
        self.push(&format!("&{v:?}"))
    }
    fn serialize_none(self) -> Res {
        self.push("None")
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Res {
        self.push("Some(")?;
        v.serialize(&mut *self)?;
        self.push(")")
    }
    fn serialize_unit(self) -> Res {
        self.push("()")
    }
    fn serialize_unit_struct(self, name: &'static str) -> Res {
        self.push(&format!("{PATH}{name}"))
    }
    fn serialize_unit_variant(self, name: &'static str, _: u32, variant: &'static str) -> Res {
        self.push(&format!("{PATH}{name}::{variant}"))
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, name: &'static str, v: &T) -> Res {
        self.push(&format!("{PATH}{name}("))?;
        v.serialize(&mut *self)?;
        self.push(")")
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Res {
        self.push(&format!("{PATH}{name}::{variant}("))?;
        v.serialize(&mut *self)?;
        self.push(")")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, Error> {
        self.0.push('[');
        Ok(Compound {
            w: self,
            first: true,
            close: "]",
        })
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a>, Error> {
        // serde writes fixed-size arrays as tuples.
        self.serialize_seq(None)
    }
    fn serialize_tuple_struct(self, name: &'static str, _: usize) -> Result<Compound<'a>, Error> {
        let _ = write!(self.0, "{PATH}{name}(");
        Ok(Compound {
            w: self,
            first: true,
            close: ")",
        })
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        let _ = write!(self.0, "{PATH}{name}::{variant}(");
        Ok(Compound {
            w: self,
            first: true,
            close: ")",
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(Error("maps have no constant expression".into()))
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Compound<'a>, Error> {
        let _ = write!(self.0, "{PATH}{name} {{ ");
        Ok(Compound {
            w: self,
            first: true,
            close: " }",
        })
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Error> {
        let _ = write!(self.0, "{PATH}{name}::{variant} {{ ");
        Ok(Compound {
            w: self,
            first: true,
            close: " }",
        })
    }
}

macro_rules! compound {
    ($($tr:ident :: $m:ident),*) => {$(
        impl ser::$tr for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn $m<T: ?Sized + Serialize>(&mut self, v: &T) -> Res {
                self.sep();
                v.serialize(&mut *self.w)
            }
            fn end(self) -> Res {
                self.w.push(self.close)
            }
        }
    )*};
}

compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

macro_rules! named {
    ($($tr:ident),*) => {$(
        impl ser::$tr for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, v: &T) -> Res {
                self.sep();
                self.w.0.push_str(key);
                self.w.0.push_str(": ");
                v.serialize(&mut *self.w)
            }
            fn end(self) -> Res {
                self.w.push(self.close)
            }
        }
    )*};
}

named!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use super::to_expr;
    use kiln_runtime::typed::params::{Unary, UnaryOp};

    #[test]
    fn writes_rust_expressions() {
        let e = to_expr(&Unary {
            op: UnaryOp::LeakyRelu { alpha: 0.5 },
        });
        assert_eq!(
            e,
            "$rt::typed::params::Unary { op: $rt::typed::params::UnaryOp::LeakyRelu { alpha: 0.5f32 } }"
        );
        assert_eq!(to_expr(&[1usize, 2]), "[1, 2]");
        assert_eq!(to_expr(&f32::NEG_INFINITY), "f32::NEG_INFINITY");
        assert_eq!(to_expr(&-3isize), "-3");
    }
}
