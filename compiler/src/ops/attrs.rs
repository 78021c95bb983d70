//! Attribute lookup for one node, used only by the operators' parsers: after loading,
//! nothing looks an attribute up by name.

use onnx_protobuf::AttributeProto;
use onnx_protobuf::attribute_proto::AttributeType;

use super::R;
use crate::ir::{AutoPad, Window};
use crate::tensor::Tensor;

#[derive(Clone, Copy)]
pub struct Attrs<'a>(pub &'a [AttributeProto]);

impl<'a> Attrs<'a> {
    pub fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.0.iter().find(|a| a.name == name)
    }

    fn typed(&self, name: &str, want: AttributeType) -> R<Option<&'a AttributeProto>> {
        match self.get(name) {
            None => Ok(None),
            Some(a) => match a.type_.enum_value() {
                // Old exporters leave the type unset; trust the field then.
                Ok(AttributeType::UNDEFINED) => Ok(Some(a)),
                Ok(t) if t == want => Ok(Some(a)),
                _ => Err(format!(
                    "attribute `{name}` has type {:?}, expected {want:?}",
                    a.type_
                )),
            },
        }
    }

    pub fn int(&self, name: &str) -> R<Option<i64>> {
        Ok(self.typed(name, AttributeType::INT)?.map(|a| a.i))
    }

    pub fn int_or(&self, name: &str, default: i64) -> R<i64> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    pub fn flag(&self, name: &str) -> R<bool> {
        Ok(self.int_or(name, 0)? != 0)
    }

    pub fn float(&self, name: &str) -> R<Option<f32>> {
        Ok(self.typed(name, AttributeType::FLOAT)?.map(|a| a.f))
    }

    pub fn float_or(&self, name: &str, default: f32) -> R<f32> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    pub fn ints(&self, name: &str) -> R<Option<Vec<i64>>> {
        Ok(self
            .typed(name, AttributeType::INTS)?
            .map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> R<Option<Vec<f32>>> {
        Ok(self
            .typed(name, AttributeType::FLOATS)?
            .map(|a| a.floats.clone()))
    }

    pub fn usizes(&self, name: &str) -> R<Option<Vec<usize>>> {
        match self.ints(name)? {
            None => Ok(None),
            Some(v) => v
                .iter()
                .map(|&x| {
                    usize::try_from(x)
                        .map_err(|_| format!("attribute `{name}` has a negative value {x}"))
                })
                .collect::<R<Vec<_>>>()
                .map(Some),
        }
    }

    pub fn string(&self, name: &str) -> R<Option<String>> {
        Ok(self
            .typed(name, AttributeType::STRING)?
            .map(|a| String::from_utf8_lossy(&a.s).into_owned()))
    }

    pub fn strings(&self, name: &str) -> R<Option<Vec<String>>> {
        Ok(self.typed(name, AttributeType::STRINGS)?.map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        }))
    }

    pub fn tensor(&self, name: &str) -> R<Option<Tensor>> {
        match self.typed(name, AttributeType::TENSOR)? {
            Some(a) if a.t.is_some() => crate::load::tensor_from_proto(&a.t).map(Some),
            _ => Ok(None),
        }
    }

    /// A positive integer attribute.
    pub fn positive(&self, name: &str, default: Option<i64>) -> R<usize> {
        let v = match (self.int(name)?, default) {
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => return Err(format!("attribute `{name}` is required")),
        };
        if v >= 1 {
            Ok(v as usize)
        } else {
            Err(format!("attribute `{name}` must be positive, got {v}"))
        }
    }

    /// Convolution and pooling window attributes.
    pub fn window(&self) -> R<Window> {
        let auto_pad = match self.string("auto_pad")?.as_deref() {
            None | Some("NOTSET") | Some("") => AutoPad::NotSet,
            Some("SAME_UPPER") => AutoPad::SameUpper,
            Some("SAME_LOWER") => AutoPad::SameLower,
            Some("VALID") => AutoPad::Valid,
            Some(other) => return Err(format!("unknown auto_pad `{other}`")),
        };
        Ok(Window {
            kernel_shape: self.usizes("kernel_shape")?,
            strides: self.usizes("strides")?,
            dilations: self.usizes("dilations")?,
            pads: self.usizes("pads")?,
            auto_pad,
            ceil_mode: self.flag("ceil_mode")?,
        })
    }
}
