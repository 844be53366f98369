//! One object file's symbols: functions, inlined frames and `file:line` from
//! its DWARF, read one compilation unit at a time, and names from its symbol
//! table where no unit covers an address.
//!
//! A unit is found through `.debug_aranges` (or, in an object without it,
//! the units' own ranges, read once) and parsed the first time an address
//! lies in it; a reference into another unit parses that unit's
//! header and root only. So the cost is the units the samples touch, not
//! the whole file's (a Rust binary links a thousand units, std's among
//! them): `addr2line`'s context reads every unit's ranges and line header
//! before the first lookup. The answers are `addr2line`'s (a test holds
//! them to it): the same frames, names, files and lines.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use gimli::{AttributeValue, DebugInfoOffset, UnitOffset};
use object::{Object, ObjectSection};

/// Every section this module reads lies in the file's mapping, which lives
/// as long as the [`ObjectSymbols`] that holds it (see there).
type Slice = gimli::EndianSlice<'static, gimli::RunTimeEndian>;

/// How deep a chain of `DW_AT_abstract_origin` / `DW_AT_specification` is
/// followed for a name (`addr2line`'s limit).
const NAME_REFERENCE_LIMIT: usize = 16;

/// One frame found in DWARF: a function (inlined or not) and where in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DwarfFrame {
    /// Demangled where the unit's language or the name's form says how.
    pub(crate) function: String,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
}

/// A mapped object file, its DWARF and its symbol table.
pub(crate) struct ObjectSymbols {
    dwarf: Option<LazyDwarf>,
    /// Start address and name of each symbol, sorted by address: built at
    /// the first address no unit covers.
    symbols: Option<object::SymbolMap<object::SymbolMapName<'static>>>,
    object: object::File<'static>,
    /// Last, so that it is dropped after everything above, which borrows it.
    _map: memmap2::Mmap,
}

impl ObjectSymbols {
    /// Maps and parses the file at `path`; `None` if it cannot be read as an
    /// object.
    pub(crate) fn open(path: &Path) -> Option<ObjectSymbols> {
        let file = File::open(path).ok()?;
        // SAFETY: a read-only private mapping; the file could change under it
        // (the mapping would then show other bytes, which the parsers
        // check like any input), as for every reader of a mapped binary.
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        // SAFETY: the bytes live as long as `map`, which this value owns and
        // drops last; nothing borrowed from them leaves this value (names
        // and paths are copied into owned strings).
        let data: &'static [u8] = unsafe { std::slice::from_raw_parts(map.as_ptr(), map.len()) };
        let object = object::File::parse(data).ok()?;
        let dwarf = LazyDwarf::load(&object);
        Some(ObjectSymbols { dwarf, symbols: None, object, _map: map })
    }

    /// The frames at `svma` (an address as the file states it), innermost
    /// first; empty where no unit describes it.
    pub(crate) fn frames(&mut self, svma: u64) -> Vec<DwarfFrame> {
        self.dwarf.as_mut().and_then(|d| d.frames(svma).ok()).unwrap_or_default()
    }

    /// The raw name of the symbol that holds `svma`.
    pub(crate) fn symbol(&mut self, svma: u64) -> Option<&str> {
        let object = &self.object;
        let symbols = self.symbols.get_or_insert_with(|| object.symbol_map());
        symbols.containing(svma).map(|s| s.name())
    }
}

/// DWARF read on demand, one unit at a time.
struct LazyDwarf {
    dwarf: gimli::Dwarf<Slice>,
    /// `.debug_aranges` (else the units' ranges): begin, end, the unit's
    /// offset; sorted by begin.
    aranges: Vec<(u64, u64, DebugInfoOffset)>,
    /// Every unit's offset, sorted: read at the first reference into
    /// another unit.
    unit_offsets: Option<Vec<DebugInfoOffset>>,
    /// Parsed units (`None`: could not be parsed).
    units: HashMap<DebugInfoOffset, Option<Box<UnitSymbols>>>,
}

/// A unit, its line table and its functions' ranges.
struct UnitSymbols {
    unit: gimli::Unit<Slice>,
    language: Option<gimli::DwLang>,
    /// The line table run once to find its sequences (one per function
    /// in a Rust or C++ unit), sorted by start, each run again for the
    /// addresses in it; `None` until needed.
    lines: Option<(gimli::CompleteLineProgram<Slice>, Vec<gimli::LineSequence<Slice>>)>,
    /// `DW_TAG_subprogram` ranges (begin, end, entry), sorted by begin;
    /// `None` until needed.
    functions: Option<Vec<(u64, u64, UnitOffset)>>,
}

/// An inlined call on the way to an address: the callee's entry, and where
/// in its caller the call is.
struct InlinedCall {
    entry: UnitOffset,
    call_file: Option<u64>,
    call_line: u32,
}

impl LazyDwarf {
    fn load(object: &object::File<'static>) -> Option<LazyDwarf> {
        let endian =
            if object.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        let load = |id: gimli::SectionId| -> Result<Slice, gimli::Error> {
            // A compressed section reads as absent: its names come from the
            // symbol table.
            let data = object
                .section_by_name(id.name())
                .and_then(|s| match s.uncompressed_data() {
                    Ok(std::borrow::Cow::Borrowed(data)) => Some(data),
                    _ => None,
                })
                .unwrap_or(&[]);
            Ok(gimli::EndianSlice::new(data, endian))
        };
        let dwarf = gimli::Dwarf::load(load).ok()?;
        let mut aranges = Vec::new();
        let mut headers = dwarf.debug_aranges.headers();
        while let Ok(Some(header)) = headers.next() {
            let mut entries = header.entries();
            while let Ok(Some(entry)) = entries.next() {
                let range = entry.range();
                if range.begin < range.end {
                    aranges.push((range.begin, range.end, header.debug_info_offset()));
                }
            }
        }
        if aranges.is_empty() {
            // No `.debug_aranges` (clang leaves it out by default): every
            // unit's own ranges, read once, as addr2line reads them.
            let mut headers = dwarf.units();
            while let Ok(Some(header)) = headers.next() {
                let Some(offset) = header.debug_info_offset() else { continue };
                let Ok(unit) = dwarf.unit(header) else { continue };
                let Ok(mut ranges) = dwarf.unit_ranges(&unit) else { continue };
                while let Ok(Some(range)) = ranges.next() {
                    if range.begin < range.end {
                        aranges.push((range.begin, range.end, offset));
                    }
                }
            }
        }
        if aranges.is_empty() {
            return None;
        }
        aranges.sort_unstable();
        Some(LazyDwarf { dwarf, aranges, unit_offsets: None, units: HashMap::new() })
    }

    fn frames(&mut self, svma: u64) -> Result<Vec<DwarfFrame>, gimli::Error> {
        let after = self.aranges.partition_point(|a| a.0 <= svma);
        let Some(&(_, end, unit_offset)) = after.checked_sub(1).map(|i| &self.aranges[i]) else {
            return Ok(Vec::new());
        };
        if svma >= end {
            return Ok(Vec::new());
        }
        let dwarf = &self.dwarf;
        let Some(unit) =
            self.units.entry(unit_offset).or_insert_with(|| UnitSymbols::parse(dwarf, unit_offset))
        else {
            return Ok(Vec::new());
        };
        let Some(function) = unit.function_at(dwarf, svma)? else { return Ok(Vec::new()) };
        let calls = unit.inlined_calls(dwarf, function, svma)?;
        let location = unit.location(dwarf, svma)?;
        let language = unit.language;
        // Where each frame is, innermost first: the line table's answer for
        // the innermost, then each call site in its caller.
        let mut wheres = vec![location];
        for call in calls.iter().rev() {
            let line = (call.call_line != 0).then_some(call.call_line);
            let file = match call.call_file {
                Some(index) => unit.file(dwarf, index),
                None => None,
            };
            wheres.push((file, line));
        }
        let entries: Vec<UnitOffset> =
            calls.iter().rev().map(|c| c.entry).chain(std::iter::once(function)).collect();
        let mut frames = Vec::with_capacity(entries.len());
        for (entry, (file, line)) in entries.into_iter().zip(wheres) {
            let name = self.name(unit_offset, entry, NAME_REFERENCE_LIMIT)?;
            let Some(name) = name else { continue };
            frames.push(DwarfFrame { function: demangle(&name, language), file, line });
        }
        Ok(frames)
    }

    /// The name of the entry at `entry` in unit `unit_offset`: its linkage
    /// name, else its name, else its origin's or specification's.
    fn name(
        &mut self,
        unit_offset: DebugInfoOffset,
        entry: UnitOffset,
        limit: usize,
    ) -> Result<Option<String>, gimli::Error> {
        if limit == 0 {
            return Ok(None);
        }
        let dwarf = &self.dwarf;
        let Some(Some(unit)) = self.units.get(&unit_offset) else { return Ok(None) };
        let die = unit.unit.entry(entry)?;
        let mut name = None;
        let mut next = None;
        for attr in die.attrs() {
            match attr.name() {
                gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                    if let Ok(value) = dwarf.attr_string(&unit.unit, attr.value()) {
                        return Ok(Some(value.to_string_lossy().into_owned()));
                    }
                }
                gimli::DW_AT_name => {
                    if let Ok(value) = dwarf.attr_string(&unit.unit, attr.value()) {
                        name = Some(value.to_string_lossy().into_owned());
                    }
                }
                gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => next = Some(attr.value()),
                _ => {}
            }
        }
        if name.is_some() {
            return Ok(name);
        }
        match next {
            Some(AttributeValue::UnitRef(offset)) => self.name(unit_offset, offset, limit - 1),
            Some(AttributeValue::DebugInfoRef(offset)) => {
                let Some(other) = self.unit_holding(offset) else { return Ok(None) };
                let Some(Some(unit)) = self.units.get(&other) else { return Ok(None) };
                let Some(offset) = offset.to_unit_offset(&unit.unit.header) else { return Ok(None) };
                self.name(other, offset, limit - 1)
            }
            _ => Ok(None),
        }
    }

    /// The offset of the unit that holds `offset`, parsed.
    fn unit_holding(&mut self, offset: DebugInfoOffset) -> Option<DebugInfoOffset> {
        let dwarf = &self.dwarf;
        let offsets = self.unit_offsets.get_or_insert_with(|| {
            let mut offsets = Vec::new();
            let mut headers = dwarf.units();
            while let Ok(Some(header)) = headers.next() {
                if let Some(offset) = header.debug_info_offset() {
                    offsets.push(offset);
                }
            }
            offsets
        });
        let after = offsets.partition_point(|o| o.0 <= offset.0);
        let unit_offset = offsets[after.checked_sub(1)?];
        self.units.entry(unit_offset).or_insert_with(|| UnitSymbols::parse(dwarf, unit_offset));
        Some(unit_offset)
    }
}

impl UnitSymbols {
    fn parse(dwarf: &gimli::Dwarf<Slice>, offset: DebugInfoOffset) -> Option<Box<UnitSymbols>> {
        let header = dwarf.debug_info.header_from_offset(offset).ok()?;
        let unit = dwarf.unit(header).ok()?;
        let language = match unit.entry(unit.header.root_offset()).ok()?.attr_value(gimli::DW_AT_language) {
            Some(AttributeValue::Language(language)) => Some(language),
            _ => None,
        };
        Some(Box::new(UnitSymbols { unit, language, lines: None, functions: None }))
    }

    /// The subprogram whose ranges hold `svma`.
    fn function_at(
        &mut self,
        dwarf: &gimli::Dwarf<Slice>,
        svma: u64,
    ) -> Result<Option<UnitOffset>, gimli::Error> {
        if self.functions.is_none() {
            self.functions = Some(self.parse_functions(dwarf)?);
        }
        let functions = self.functions.as_deref().unwrap_or_default();
        let after = functions.partition_point(|f| f.0 <= svma);
        Ok(after.checked_sub(1).map(|i| functions[i]).filter(|f| svma < f.1).map(|f| f.2))
    }

    /// Every subprogram's ranges, reading only their entries' attributes
    /// (the others are skipped, not parsed).
    fn parse_functions(
        &self,
        dwarf: &gimli::Dwarf<Slice>,
    ) -> Result<Vec<(u64, u64, UnitOffset)>, gimli::Error> {
        let mut functions = Vec::new();
        let mut entries = self.unit.entries_raw(None)?;
        while !entries.is_empty() {
            let offset = entries.next_offset();
            let Some(abbrev) = entries.read_abbreviation()? else { continue };
            if abbrev.tag() != gimli::DW_TAG_subprogram {
                entries.skip_attributes(abbrev.attributes())?;
                continue;
            }
            let (mut low, mut high, mut size, mut list) = (None, None, None, None);
            for spec in abbrev.attributes() {
                let attr = entries.read_attribute(*spec)?;
                match (attr.name(), attr.value()) {
                    (gimli::DW_AT_low_pc, value) => low = dwarf.attr_address(&self.unit, value)?,
                    (gimli::DW_AT_high_pc, AttributeValue::Udata(value)) => size = Some(value),
                    (gimli::DW_AT_high_pc, value) => high = dwarf.attr_address(&self.unit, value)?,
                    (gimli::DW_AT_ranges, value) => list = dwarf.attr_ranges_offset(&self.unit, value)?,
                    _ => {}
                }
            }
            if let Some(list) = list {
                let mut ranges = dwarf.ranges(&self.unit, list)?;
                while let Some(range) = ranges.next()? {
                    if range.begin < range.end {
                        functions.push((range.begin, range.end, offset));
                    }
                }
            } else if let Some(low) = low {
                let end = match (high, size) {
                    (Some(high), _) => high,
                    (None, Some(size)) => low.wrapping_add(size),
                    (None, None) => low,
                };
                if low < end {
                    functions.push((low, end, offset));
                }
            }
        }
        functions.sort_unstable_by_key(|f| f.0);
        Ok(functions)
    }

    /// The inlined calls inside `function` that hold `svma`, outermost
    /// first.
    fn inlined_calls(
        &self,
        dwarf: &gimli::Dwarf<Slice>,
        function: UnitOffset,
        svma: u64,
    ) -> Result<Vec<InlinedCall>, gimli::Error> {
        let mut calls: Vec<(isize, InlinedCall)> = Vec::new();
        let mut entries = self.unit.entries_at_offset(function)?;
        let Some(root) = entries.next_dfs()? else { return Ok(Vec::new()) };
        let base = root.depth();
        // Entries deeper than this are skipped (a subtree that cannot hold
        // `svma`).
        let mut skip_below: Option<isize> = None;
        while let Some(entry) = entries.next_dfs()? {
            let depth = entry.depth();
            if depth <= base || calls.last().is_some_and(|(d, _)| depth <= *d) {
                break;
            }
            if skip_below.is_some_and(|d| depth > d) {
                continue;
            }
            skip_below = None;
            match entry.tag() {
                gimli::DW_TAG_subprogram => skip_below = Some(depth),
                gimli::DW_TAG_inlined_subroutine => {
                    let mut holds = false;
                    let mut ranges = dwarf.die_ranges(&self.unit, entry)?;
                    while let Some(range) = ranges.next()? {
                        holds |= range.begin <= svma && svma < range.end;
                    }
                    if !holds {
                        skip_below = Some(depth);
                        continue;
                    }
                    let call_file = match entry.attr_value(gimli::DW_AT_call_file) {
                        // DWARF 5 numbers files from 0; before, 0 is none.
                        Some(AttributeValue::FileIndex(index))
                            if index > 0 || self.unit.header.version() >= 5 =>
                        {
                            Some(index)
                        }
                        _ => None,
                    };
                    let call_line =
                        entry.attr(gimli::DW_AT_call_line).and_then(|a| a.udata_value()).unwrap_or(0) as u32;
                    calls.push((depth, InlinedCall { entry: entry.offset(), call_file, call_line }));
                }
                _ => {}
            }
        }
        Ok(calls.into_iter().map(|(_, c)| c).collect())
    }

    /// The line table's file and line at `svma`.
    fn location(
        &mut self,
        dwarf: &gimli::Dwarf<Slice>,
        svma: u64,
    ) -> Result<(Option<String>, Option<u32>), gimli::Error> {
        if self.lines.is_none() {
            let Some(program) = self.unit.line_program.clone() else { return Ok((None, None)) };
            let (program, mut sequences) = program.sequences()?;
            sequences.retain(|s| s.start < s.end);
            sequences.sort_unstable_by_key(|s| s.start);
            self.lines = Some((program, sequences));
        }
        let Some((program, sequences)) = &self.lines else { return Ok((None, None)) };
        let after = sequences.partition_point(|s| s.start <= svma);
        let Some(sequence) = after.checked_sub(1).map(|i| &sequences[i]).filter(|s| svma < s.end) else {
            return Ok((None, None));
        };
        // The last row at or before `svma` (of rows at one address, the
        // last).
        let mut found = None;
        let mut rows = program.resume_from(sequence);
        while let Some((_, row)) = rows.next_row()? {
            if row.end_sequence() || row.address() > svma {
                break;
            }
            found = Some((row.file_index(), row.line().map_or(0, |l| l.get() as u32)));
        }
        let Some((file, line)) = found else { return Ok((None, None)) };
        Ok((self.file(dwarf, file), (line != 0).then_some(line)))
    }

    /// File `index` of the unit's line table as a path: the unit's
    /// directory, the file's directory, its name.
    fn file(&self, dwarf: &gimli::Dwarf<Slice>, index: u64) -> Option<String> {
        let header = self.unit.line_program.as_ref()?.header();
        let file = header.file(index)?;
        let string = |value| -> Option<String> {
            Some(dwarf.attr_string(&self.unit, value).ok()?.to_string_lossy().into_owned())
        };
        let mut path = match &self.unit.comp_dir {
            Some(dir) => dir.to_string_lossy().into_owned(),
            None => String::new(),
        };
        // Directory 0 is the unit's own.
        if file.directory_index() != 0 {
            if let Some(directory) = file.directory(header) {
                path_push(&mut path, &string(directory)?);
            }
        }
        path_push(&mut path, &string(file.path_name())?);
        Some(path)
    }
}

/// Appends `part` to `path` with a `/`, or replaces it when `part` is
/// absolute.
fn path_push(path: &mut String, part: &str) {
    if part.starts_with('/') || path.is_empty() {
        *path = part.to_string();
    } else {
        if !path.ends_with('/') {
            path.push('/');
        }
        path.push_str(part);
    }
}

/// A Rust name demangled without its hash; any other name as it is.
pub(crate) fn demangle(name: &str, language: Option<gimli::DwLang>) -> String {
    match language {
        Some(gimli::DW_LANG_Rust) | None => match rustc_demangle::try_demangle(name) {
            Ok(demangled) => format!("{demangled:#}"),
            Err(_) => name.to_string(),
        },
        Some(_) => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ObjectSymbol;

    /// `addr2line`'s frames at `svma`, as [`ObjectSymbols::frames`] gives them.
    fn reference_frames(loader: &addr2line::Loader, svma: u64) -> Vec<DwarfFrame> {
        let mut frames = Vec::new();
        let Ok(mut iter) = loader.find_frames(svma) else { return frames };
        while let Ok(Some(found)) = iter.next() {
            let Some(function) = found.function.as_ref() else { continue };
            let Ok(name) = function.demangle() else { continue };
            let (file, line) = match found.location {
                Some(location) => (location.file.map(str::to_string), location.line),
                None => (None, None),
            };
            frames.push(DwarfFrame { function: name.into_owned(), file, line });
        }
        frames
    }

    /// Holds the frames of `path` to addr2line's at the first, middle and
    /// last byte of its functions, at most `limit` addresses spread over it.
    fn assert_frames_are_addr2line_s(path: &Path, limit: usize) {
        let bytes = std::fs::read(path).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let mut addresses = Vec::new();
        for symbol in file.symbols() {
            if symbol.kind() == object::SymbolKind::Text && symbol.size() > 0 {
                let (start, size) = (symbol.address(), symbol.size());
                addresses.extend([start, start + size / 2, start + size - 1]);
            }
        }
        let step = addresses.len().div_ceil(limit);
        let addresses: Vec<u64> = addresses.into_iter().step_by(step).collect();

        let mut symbols = ObjectSymbols::open(path).unwrap();
        let loader = addr2line::Loader::new(path).unwrap();
        let mut with_lines = 0;
        for &svma in &addresses {
            let frames = symbols.frames(svma);
            assert_eq!(frames, reference_frames(&loader, svma), "at 0x{svma:x} of {}", path.display());
            with_lines += usize::from(frames.first().is_some_and(|f| f.file.is_some() && f.line.is_some()));
        }
        // Not two empty answers: most addresses have DWARF here.
        assert!(
            with_lines * 2 > addresses.len(),
            "{with_lines} of {} addresses with a line",
            addresses.len()
        );
    }

    #[test]
    fn every_function_of_this_binary_gets_the_frames_addr2line_gives() {
        assert_frames_are_addr2line_s(&std::fs::read_link("/proc/self/exe").unwrap(), 3000);
    }

    #[test]
    fn a_binary_without_debug_aranges_is_read_through_its_units_ranges() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let copy = std::env::temp_dir().join(format!("trace-stacks-no-aranges-{}", std::process::id()));
        let status = std::process::Command::new("objcopy")
            .arg("--remove-section=.debug_aranges")
            .arg(&exe)
            .arg(&copy)
            .status()
            .unwrap_or_else(|e| {
                panic!("objcopy ({e}) is needed: apt-get install binutils (scripts/install-test-tools.sh)")
            });
        assert!(status.success(), "objcopy --remove-section=.debug_aranges {}", exe.display());
        let copied = std::fs::read(&copy).unwrap();
        let sections = object::File::parse(&*copied).unwrap();
        assert!(sections.section_by_name(".debug_aranges").is_none(), "the copy still has .debug_aranges");
        assert_frames_are_addr2line_s(&copy, 600);
        let _ = std::fs::remove_file(&copy);
    }
}
