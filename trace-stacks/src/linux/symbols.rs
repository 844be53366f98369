//! Symbolization, once, at the finish, of the addresses the samples hold:
//! `addr2line` for functions (inlined ones too) and `file:line` from DWARF,
//! the symbol table where there is no DWARF, `rustc-demangle` for names.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use object::{Object, ObjectSymbol};

use super::unwinding::{object_index, LoadedObject};
use crate::model::{Frame, Sample};

/// A sample as the reader thread keeps it: lookup addresses, leaf first.
pub(crate) struct RawSample {
    pub(crate) tid: u32,
    pub(crate) time_ns: u64,
    pub(crate) addresses: Vec<u64>,
    pub(crate) unwound: bool,
}

/// How one object's addresses get names.
enum ObjectSymbols {
    /// DWARF and the symbol table of a file.
    Loader(Box<addr2line::Loader>),
    /// The symbol table of an image in memory (the vdso): start, name.
    Table(Vec<(u64, String)>),
    /// Nothing could be read.
    None,
}

/// Turns the raw samples into samples that index symbolized frames.
pub(crate) fn symbolize(objects: &[LoadedObject], raw: Vec<RawSample>) -> (Vec<Frame>, Vec<Sample>) {
    let mut by_address: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for sample in &raw {
        for &address in &sample.addresses {
            by_address.entry(address).or_default();
        }
    }
    let mut symbols: HashMap<usize, ObjectSymbols> = HashMap::new();
    let mut frames = Vec::new();
    for (&address, indices) in by_address.iter_mut() {
        let object = object_index(objects, address);
        let before = frames.len();
        match object {
            Some(index) => {
                let object = &objects[index];
                let symbols = symbols.entry(index).or_insert_with(|| open_symbols(object));
                frames_of(address, index, object, symbols, &mut frames);
            }
            None => frames.push(Frame {
                function: format!("0x{address:x}"),
                file: None,
                line: None,
                mapping: None,
                rel_pc: address,
                inlined: false,
            }),
        }
        indices.extend((before..frames.len()).map(|i| i as u32));
    }
    let samples = raw
        .into_iter()
        .map(|sample| Sample {
            tid: sample.tid,
            time_ns: sample.time_ns,
            frames: sample
                .addresses
                .iter()
                .flat_map(|a| by_address.get(a).into_iter().flatten().copied())
                .collect(),
            unwound: sample.unwound,
        })
        .collect();
    (frames, samples)
}

fn open_symbols(object: &LoadedObject) -> ObjectSymbols {
    let path = &object.mapping.path;
    if path == "[vdso]" {
        // SAFETY: the vdso stays mapped, readable, for the life of the process.
        let image = unsafe {
            std::slice::from_raw_parts(
                object.mapping.start as *const u8,
                (object.mapping.end - object.mapping.start) as usize,
            )
        };
        let Ok(file) = object::File::parse(image) else { return ObjectSymbols::None };
        let mut table: Vec<(u64, String)> = file
            .dynamic_symbols()
            .chain(file.symbols())
            .filter(|s| s.is_definition() && s.size() > 0)
            .filter_map(|s| Some((s.address(), s.name().ok()?.to_string())))
            .collect();
        table.sort();
        return ObjectSymbols::Table(table);
    }
    match addr2line::Loader::new(Path::new(path)) {
        Ok(loader) => ObjectSymbols::Loader(Box::new(loader)),
        Err(_) => ObjectSymbols::None,
    }
}

/// Pushes the frames of one address, innermost (inlined) first.
fn frames_of(
    address: u64,
    mapping: usize,
    object: &LoadedObject,
    symbols: &ObjectSymbols,
    frames: &mut Vec<Frame>,
) {
    let rel_pc = address - object.mapping.start + object.mapping.offset;
    let svma = address.wrapping_sub(object.base_avma);
    let frame = |function: String, file: Option<String>, line: Option<u32>| Frame {
        function,
        file,
        line,
        mapping: Some(mapping as u32),
        rel_pc,
        inlined: true,
    };
    let first = frames.len();
    match symbols {
        ObjectSymbols::Loader(loader) => {
            if let Ok(mut iter) = loader.find_frames(svma) {
                while let Ok(Some(found)) = iter.next() {
                    let Some(function) = found.function.as_ref() else { continue };
                    let Ok(name) = function.demangle() else { continue };
                    let (file, line) = match found.location {
                        Some(location) => (location.file.map(str::to_string), location.line),
                        None => (None, None),
                    };
                    frames.push(frame(name.into_owned(), file, line));
                }
            }
            if frames.len() == first {
                if let Some(name) = loader.find_symbol(svma) {
                    frames.push(frame(demangle(name), None, None));
                }
            }
        }
        ObjectSymbols::Table(table) => {
            let after = table.partition_point(|(start, _)| *start <= svma);
            if let Some((_, name)) = after.checked_sub(1).map(|i| &table[i]) {
                frames.push(frame(demangle(name), None, None));
            }
        }
        ObjectSymbols::None => {}
    }
    if frames.len() == first {
        let file_name = Path::new(&object.mapping.path)
            .file_name()
            .map_or_else(|| object.mapping.path.clone(), |n| n.to_string_lossy().into_owned());
        frames.push(frame(format!("0x{rel_pc:x} in {file_name}"), None, None));
    }
    // Every frame but the outermost was inlined into the one after it.
    if let Some(outer) = frames.last_mut() {
        outer.inlined = false;
    }
}

/// A Rust name without its hash; any other name as it is.
fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(demangled) => format!("{demangled:#}"),
        Err(_) => name.to_string(),
    }
}
