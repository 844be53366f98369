//! The protobuf wire format by hand: fields appended to a `Vec<u8>`, and
//! read back one at a time.
//!
//! # Overview
//!
//! Every writer of protobuf in the workspace (the Perfetto sink, the family
//! merge, the OTLP exporter) writes through these functions, in the manner of
//! Perfetto's protozero: a message is the bytes its fields append to a buffer,
//! in the order the caller writes them, and a nested message is opened with
//! [`open`], written in place, and closed with [`close`], which fills in its
//! length afterwards. Nothing is built, sized or copied before it is written.
//!
//! - A field starts with its key, `(field number << 3) | wire type`
//!   ([`key`], [`WireType`]), as a varint ([`put_varint`]).
//! - [`put_uint`], [`put_int`] and [`put_bool`] write varint fields (a negative
//!   `int64` or `int32` as ten bytes, two's complement, as protobuf does;
//!   `sint` zig-zag encoding is not needed by any schema written here);
//!   [`put_fixed64`] and [`put_double`] eight little-endian bytes;
//!   [`put_bytes`] and [`put_str`] a length and the bytes.
//! - [`open`] writes a nested message's key and holds one byte for its
//!   length; [`close`] writes the length there, moving the body on in the
//!   rare case that the length takes more than one byte (a body of 128 bytes
//!   or more). Lengths are written in their shortest form, so the bytes are
//!   those any protobuf library writes for the same fields in the same order.
//! - A repeated scalar field is written as one field per value (unpacked):
//!   call the writer once per value. A packed run is [`put_bytes`] of the
//!   values' encodings, which no schema written here asks for.
//! - [`Fields`] walks the fields of a message, for readers that pick a few
//!   fields out of bytes written elsewhere (the merge reads the sink's files).
//!
//! # Example
//!
//! ```
//! use trace_proto_wire::{close, open, put_str, put_uint, Fields, Value};
//!
//! // message Outer { Inner inner = 1; }  message Inner { uint64 id = 1; string name = 2; }
//! let mut buf = Vec::new();
//! let inner = open(&mut buf, 1);
//! put_uint(&mut buf, 1, 300);
//! put_str(&mut buf, 2, "compile");
//! close(&mut buf, inner);
//! assert_eq!(buf, b"\x0a\x0c\x08\xac\x02\x12\x07compile");
//!
//! let (field, value) = Fields::new(&buf).next().unwrap().unwrap();
//! assert_eq!(field, 1);
//! let Value::Bytes(inner) = value else { panic!("a nested message") };
//! let fields: Vec<_> = Fields::new(inner).map(|f| f.unwrap()).collect();
//! assert_eq!(fields, [(1, Value::Varint(300)), (2, Value::Bytes(b"compile"))]);
//! ```
//!
//! # Configuration
//!
//! None: no environment variable, no feature flag, no dependency.
//!
//! # What it does not do
//!
//! It knows no schema: field numbers, which fields a message has, proto2's
//! "written when set" or proto3's "left out at zero" are the caller's. It
//! does not check that a caller closes what it opened, in order (a message
//! closed out of order gets a wrong length; the tests of each writer decode
//! what it writes with an independent decoder). It has no groups (wire types
//! 3 and 4, deprecated) and no `sint` (zig-zag) fields.

#![deny(missing_docs)]

/// How a field's value is laid out after its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireType {
    /// A varint: integers, booleans, enums.
    Varint = 0,
    /// Eight little-endian bytes: `fixed64`, `sfixed64`, `double`.
    Fixed64 = 1,
    /// A varint length, then that many bytes: strings, bytes, nested messages.
    Len = 2,
    /// Four little-endian bytes: `fixed32`, `sfixed32`, `float`.
    Fixed32 = 5,
}

/// The key that opens a field: its number and wire type, as one varint.
///
/// ```
/// use trace_proto_wire::{key, WireType};
/// assert_eq!(key(1, WireType::Len), 0x0a);
/// assert_eq!(key(58, WireType::Varint), 0x1d0);
/// ```
pub const fn key(field: u32, wire: WireType) -> u64 {
    ((field as u64) << 3) | wire as u64
}

/// Appends `value` as a varint: seven bits a byte, least significant first,
/// the top bit set on every byte but the last.
#[inline]
pub fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

/// The bytes `value` takes as a varint (1 to 10).
#[inline]
pub const fn varint_len(value: u64) -> usize {
    // One byte per started group of seven significant bits, 0 taking one.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Appends the key of field `field` of wire type `wire`.
#[inline]
pub fn put_key(buf: &mut Vec<u8>, field: u32, wire: WireType) {
    put_varint(buf, key(field, wire));
}

/// Appends an unsigned varint field (`uint64`, `uint32`, an enum's value that
/// is not negative).
#[inline]
pub fn put_uint(buf: &mut Vec<u8>, field: u32, value: u64) {
    put_key(buf, field, WireType::Varint);
    put_varint(buf, value);
}

/// Appends a signed varint field (`int64`, `int32`, an enum): a negative value
/// takes ten bytes, as protobuf writes it.
#[inline]
pub fn put_int(buf: &mut Vec<u8>, field: u32, value: i64) {
    put_uint(buf, field, value as u64);
}

/// Appends a `bool` field.
#[inline]
pub fn put_bool(buf: &mut Vec<u8>, field: u32, value: bool) {
    put_uint(buf, field, u64::from(value));
}

/// Appends a `fixed64` field.
#[inline]
pub fn put_fixed64(buf: &mut Vec<u8>, field: u32, value: u64) {
    put_key(buf, field, WireType::Fixed64);
    buf.extend_from_slice(&value.to_le_bytes());
}

/// Appends a `double` field.
#[inline]
pub fn put_double(buf: &mut Vec<u8>, field: u32, value: f64) {
    put_fixed64(buf, field, value.to_bits());
}

/// Appends a length-delimited field holding `bytes` (a `bytes` field, or a
/// message encoded elsewhere).
#[inline]
pub fn put_bytes(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(buf, field, WireType::Len);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

/// Appends a `string` field.
#[inline]
pub fn put_str(buf: &mut Vec<u8>, field: u32, text: &str) {
    put_bytes(buf, field, text.as_bytes());
}

/// A nested message opened by [`open`]: where its body starts. Hand it to
/// [`close`] once the body is written.
#[derive(Debug)]
#[must_use = "a nested message's length is written only by `close`"]
pub struct Nested {
    body: usize,
}

/// Opens a nested message as field `field`: writes its key and holds one byte
/// for its length. Write its fields, then [`close`] it.
#[inline]
pub fn open(buf: &mut Vec<u8>, field: u32) -> Nested {
    put_key(buf, field, WireType::Len);
    buf.push(0);
    Nested { body: buf.len() }
}

/// Closes the nested message `nested`, whose body is everything written since
/// [`open`]: writes its length in the byte held for it, or, for a body of 128
/// bytes or more, moves the body on to make room for the longer length.
#[inline]
pub fn close(buf: &mut Vec<u8>, nested: Nested) {
    let len = buf.len() - nested.body;
    if len < 0x80 {
        buf[nested.body - 1] = len as u8;
    } else {
        close_long(buf, nested.body, len);
    }
}

/// [`close`] for a body of 128 bytes or more.
#[cold]
fn close_long(buf: &mut Vec<u8>, body: usize, len: usize) {
    let extra = varint_len(len as u64) - 1;
    buf.resize(buf.len() + extra, 0);
    buf.copy_within(body..body + len, body + extra);
    let mut at = body - 1;
    let mut value = len as u64;
    while value >= 0x80 {
        buf[at] = (value as u8 & 0x7f) | 0x80;
        value >>= 7;
        at += 1;
    }
    buf[at] = value as u8;
}

/// Reads a varint at `*pos`, moving `*pos` past it; `None` when the bytes end
/// first or the varint runs past ten bytes.
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// One field's value as [`Fields`] reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// A varint field's value.
    Varint(u64),
    /// A `fixed64`/`sfixed64`/`double` field's eight bytes, as a `u64`.
    Fixed64(u64),
    /// A length-delimited field's bytes (a string, bytes, a nested message,
    /// or a packed run).
    Bytes(&'a [u8]),
    /// A `fixed32`/`sfixed32`/`float` field's four bytes, as a `u32`.
    Fixed32(u32),
}

/// Bytes that are not a protobuf message: where the fault is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// The offset of the field that could not be read.
    pub at: usize,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not a protobuf message: the field at byte {} is cut short or of an unknown wire type",
            self.at
        )
    }
}

impl std::error::Error for Malformed {}

/// The fields of one message, in the order they stand: `(field number,
/// value)`, or a [`Malformed`] error (after which the walk ends).
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    /// The fields of the message `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Fields { buf, pos: 0 }
    }

    /// Where the next field starts: after a field, the end of its bytes.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn read(&mut self) -> Option<(u32, Value<'a>)> {
        let buf = self.buf;
        let key = read_varint(buf, &mut self.pos)?;
        let field = u32::try_from(key >> 3).ok()?;
        let value = match key & 7 {
            0 => Value::Varint(read_varint(buf, &mut self.pos)?),
            1 => {
                let bytes = buf.get(self.pos..self.pos.checked_add(8)?)?;
                self.pos += 8;
                Value::Fixed64(u64::from_le_bytes(bytes.try_into().ok()?))
            }
            2 => {
                let len = usize::try_from(read_varint(buf, &mut self.pos)?).ok()?;
                let bytes = buf.get(self.pos..self.pos.checked_add(len)?)?;
                self.pos += len;
                Value::Bytes(bytes)
            }
            5 => {
                let bytes = buf.get(self.pos..self.pos.checked_add(4)?)?;
                self.pos += 4;
                Value::Fixed32(u32::from_le_bytes(bytes.try_into().ok()?))
            }
            _ => return None,
        };
        Some((field, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let at = self.pos;
        match self.read() {
            Some(field) => Some(Ok(field)),
            None => {
                // The walk ends at a fault.
                self.pos = self.buf.len();
                Some(Err(Malformed { at }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use prost::Message;

    use super::*;

    #[test]
    fn varints_match_the_protobuf_encoding_at_every_length_boundary() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (16_383, &[0xff, 0x7f]),
            (16_384, &[0x80, 0x80, 0x01]),
            ((1 << 28) - 1, &[0xff, 0xff, 0xff, 0x7f]),
            (1 << 28, &[0x80, 0x80, 0x80, 0x80, 0x01]),
            (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ];
        for &(value, expected) in cases {
            let mut buf = Vec::new();
            put_varint(&mut buf, value);
            assert_eq!(buf, expected, "varint of {value}");
            assert_eq!(varint_len(value), buf.len(), "length of {value}");
            assert_eq!(read_varint(&buf, &mut 0), Some(value), "read back {value}");
        }
    }

    #[test]
    fn a_varint_cut_short_or_longer_than_ten_bytes_is_not_read() {
        assert_eq!(read_varint(&[0x80, 0x80], &mut 0), None);
        assert_eq!(read_varint(&[0xff; 11], &mut 0), None);
        assert_eq!(read_varint(&[], &mut 0), None);
    }

    #[test]
    fn a_negative_int_takes_ten_bytes_as_protobuf_writes_it() {
        let mut buf = Vec::new();
        put_int(&mut buf, 1, -1);
        assert_eq!(buf.len(), 11);
        assert_eq!(buf, prost_encoded(|b| prost::encoding::int64::encode(1, &-1, b)));
    }

    #[test]
    fn a_malformed_message_is_an_error_naming_where() {
        // Field 1 as a length of 5 with two bytes after it.
        let bytes = [0x08, 0x01, 0x0a, 0x05, b'a', b'b'];
        let fields: Vec<_> = Fields::new(&bytes).collect();
        assert_eq!(fields, [Ok((1, Value::Varint(1))), Err(Malformed { at: 2 })]);
        assert!(Malformed { at: 2 }.to_string().contains("byte 2"));
        // Wire type 3 (a group): unknown here.
        assert_eq!(Fields::new(&[0x0b]).next(), Some(Err(Malformed { at: 0 })));
    }

    fn prost_encoded(encode: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut buf = Vec::new();
        encode(&mut buf);
        buf
    }

    /// A message of every kind of field, nested, as prost writes it.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Every {
        #[prost(uint64, optional, tag = "1")]
        uint: Option<u64>,
        #[prost(int64, optional, tag = "2")]
        int: Option<i64>,
        #[prost(bool, optional, tag = "3")]
        flag: Option<bool>,
        #[prost(fixed64, repeated, packed = "false", tag = "4")]
        fixed: Vec<u64>,
        #[prost(double, optional, tag = "5")]
        double: Option<f64>,
        #[prost(string, optional, tag = "6")]
        text: Option<String>,
        #[prost(message, repeated, tag = "7")]
        children: Vec<Every>,
        #[prost(uint32, optional, tag = "58")]
        far: Option<u32>,
    }

    /// `every` written with this crate, fields in number order as prost writes them.
    fn write(buf: &mut Vec<u8>, every: &Every) {
        if let Some(v) = every.uint {
            put_uint(buf, 1, v);
        }
        if let Some(v) = every.int {
            put_int(buf, 2, v);
        }
        if let Some(v) = every.flag {
            put_bool(buf, 3, v);
        }
        for &v in &every.fixed {
            put_fixed64(buf, 4, v);
        }
        if let Some(v) = every.double {
            put_double(buf, 5, v);
        }
        if let Some(v) = &every.text {
            put_str(buf, 6, v);
        }
        for child in &every.children {
            let nested = open(buf, 7);
            write(buf, child);
            close(buf, nested);
        }
        if let Some(v) = every.far {
            put_uint(buf, 58, u64::from(v));
        }
    }

    fn every() -> impl Strategy<Value = Every> {
        let leaf = (
            prop::option::of(any::<u64>()),
            prop::option::of(any::<i64>()),
            prop::option::of(any::<bool>()),
            prop::collection::vec(any::<u64>(), 0..3),
            prop::option::of(any::<f64>().prop_filter("NaN is not equal to itself", |x| !x.is_nan())),
            prop::option::of(prop_oneof![".{0,10}", ".{120,140}", "x{16380,16390}"]),
            prop::option::of(any::<u32>()),
        )
            .prop_map(|(uint, int, flag, fixed, double, text, far)| Every {
                uint,
                int,
                flag,
                fixed,
                double,
                text,
                children: Vec::new(),
                far,
            });
        leaf.prop_recursive(3, 12, 4, |inner| {
            (inner.clone(), prop::collection::vec(inner, 0..4))
                .prop_map(|(every, children)| Every { children, ..every })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn messages_written_here_are_byte_for_byte_what_prost_writes(every in every()) {
            let mut ours = vec![0xee];
            write(&mut ours, &every);
            prop_assert_eq!(&ours[1..], &every.encode_to_vec()[..]);
            prop_assert_eq!(Every::decode(&ours[1..]).ok(), Some(every));
        }

        #[test]
        fn fields_reads_back_each_field_written(values in prop::collection::vec(any::<u64>(), 0..20)) {
            let mut buf = Vec::new();
            for (i, &v) in values.iter().enumerate() {
                match i % 4 {
                    0 => put_uint(&mut buf, i as u32 + 1, v),
                    1 => put_fixed64(&mut buf, i as u32 + 1, v),
                    2 => put_bytes(&mut buf, i as u32 + 1, &v.to_le_bytes()[..(v % 9) as usize]),
                    _ => {
                        put_key(&mut buf, i as u32 + 1, WireType::Fixed32);
                        buf.extend_from_slice(&(v as u32).to_le_bytes());
                    }
                }
            }
            let read: Vec<_> = Fields::new(&buf).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(read.len(), values.len());
            for (i, ((field, value), &v)) in read.iter().zip(&values).enumerate() {
                prop_assert_eq!(*field, i as u32 + 1);
                let expected = match i % 4 {
                    0 => Value::Varint(v),
                    1 => Value::Fixed64(v),
                    2 => Value::Bytes(&buf[0..0]),
                    _ => Value::Fixed32(v as u32),
                };
                match (value, expected) {
                    (Value::Bytes(b), Value::Bytes(_)) => prop_assert_eq!(*b, &v.to_le_bytes()[..(v % 9) as usize]),
                    (got, expected) => prop_assert_eq!(*got, expected),
                }
            }
        }
    }
}
