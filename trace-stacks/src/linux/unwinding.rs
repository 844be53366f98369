//! Unwinding a sample's copied user stack with framehop, from the `.eh_frame`
//! (DWARF CFI) of each loaded object, read from its file with `object`;
//! framehop falls back to the frame-pointer chain where an address has no
//! unwind information.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::time::{Duration, Instant};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment, ReadCache, ReadRef};

use super::proc_maps::{self, ExecMapping};
use crate::model::Mapping;

/// A stack deeper than this many frames is cut there and counted as not
/// unwound (a loop in a corrupt frame-pointer chain ends here too).
const MAX_FRAMES: usize = 512;

/// An address outside every known object makes the unwinder read
/// `/proc/self/maps` again (a library loaded after the start), at most this
/// often.
const MAPS_REFRESH_INTERVAL: Duration = Duration::from_millis(250);

/// A loaded object: its executable mapping, and where its addresses as the
/// file states them (SVMAs) are in this process.
#[derive(Clone, Debug)]
pub(crate) struct LoadedObject {
    pub(crate) mapping: Mapping,
    /// The process address of the object's address 0: `avma - base_avma` is
    /// the address the file's symbols and DWARF use.
    pub(crate) base_avma: u64,
}

/// The loaded objects known so far, in the order they were found: an
/// object's index never changes (the symbolizer and the frames keep it).
#[derive(Default)]
pub(crate) struct Objects {
    list: Vec<LoadedObject>,
    /// Indices into `list`, sorted by start address.
    by_start: Vec<usize>,
}

impl Objects {
    /// The index of the object whose executable mapping holds `address`.
    pub(crate) fn index_of(&self, address: u64) -> Option<usize> {
        let after = self.by_start.partition_point(|&i| self.list[i].mapping.start <= address);
        let index = self.by_start[after.checked_sub(1)?];
        (address < self.list[index].mapping.end).then_some(index)
    }

    pub(crate) fn list(&self) -> &[LoadedObject] {
        &self.list
    }

    /// Adds `object`, numbered after the others.
    pub(crate) fn push(&mut self, object: LoadedObject) {
        let at = self.by_start.partition_point(|&i| self.list[i].mapping.start < object.mapping.start);
        self.by_start.insert(at, self.list.len());
        self.list.push(object);
    }
}

/// The unwinder of the reader thread, with the objects it knows.
pub(crate) struct StackUnwinder {
    unwinder: UnwinderX86_64<Vec<u8>>,
    cache: CacheX86_64,
    objects: Objects,
    last_refresh: Instant,
}

impl StackUnwinder {
    /// Reads `/proc/self/maps` and the unwind sections of every object it
    /// lists.
    pub(crate) fn new() -> StackUnwinder {
        let mut unwinder = StackUnwinder {
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            objects: Objects::default(),
            last_refresh: Instant::now(),
        };
        unwinder.add_new_objects();
        unwinder
    }

    /// The objects known so far.
    pub(crate) fn objects(&self) -> &Objects {
        &self.objects
    }

    /// Unwinds one sample into `addresses` (leaf first; each a lookup
    /// address: the instruction pointer, then each return address minus
    /// one). Returns whether the unwinder reached the thread's start.
    /// `stack` is the copy of the user stack from `sp` up.
    pub(crate) fn unwind(
        &mut self,
        ip: u64,
        sp: u64,
        bp: u64,
        stack: &[u8],
        addresses: &mut Vec<u64>,
    ) -> bool {
        if self.objects.index_of(ip).is_none() && self.last_refresh.elapsed() >= MAPS_REFRESH_INTERVAL {
            self.last_refresh = Instant::now();
            self.add_new_objects();
        }
        let mut read_stack = |address: u64| {
            let offset = address.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack.get(offset..offset.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut frames = self.unwinder.iter_frames(ip, regs, &mut self.cache, &mut read_stack);
        loop {
            match frames.next() {
                Ok(Some(frame)) => {
                    if addresses.len() == MAX_FRAMES {
                        return false;
                    }
                    addresses.push(frame.address_for_lookup());
                }
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    }

    /// Adds the objects of `/proc/self/maps` not yet known.
    fn add_new_objects(&mut self) {
        let mut by_path: HashMap<String, Vec<ExecMapping>> = HashMap::new();
        for mapping in proc_maps::exec_mappings() {
            by_path.entry(mapping.path.clone()).or_default().push(mapping);
        }
        for (path, mappings) in by_path {
            // One object per path: from its first executable mapping to the
            // end of its last.
            let Some(first) = mappings.iter().min_by_key(|m| m.start) else { continue };
            let end = mappings.iter().map(|m| m.end).max().unwrap_or(first.end);
            if self.objects.list.iter().any(|o| o.mapping.start == first.start) {
                continue;
            }
            let range = first.start..end;
            let loaded = if path == "[vdso]" {
                // SAFETY: the kernel maps the vdso readable for the life of
                // the process and never unmaps it.
                let image = unsafe {
                    std::slice::from_raw_parts(range.start as *const u8, (end - range.start) as usize)
                };
                load_object(image, &path, first.offset, range.clone())
            } else {
                match File::open(&path) {
                    Ok(file) => load_object(&ReadCache::new(file), &path, first.offset, range.clone()),
                    Err(_) => None,
                }
            };
            let Some((object, module)) = loaded else { continue };
            self.unwinder.add_module(module);
            self.objects.push(object);
        }
    }
}

/// Reads what the unwinder needs from one ELF object mapped executable at
/// `range`, whose first byte there is at file offset `offset`.
fn load_object<'data, R: ReadRef<'data>>(
    data: R,
    path: &str,
    offset: u64,
    range: Range<u64>,
) -> Option<(LoadedObject, Module<Vec<u8>>)> {
    let file = object::File::parse(data).ok()?;
    // The executable segment mapped here: its file offset rounded down to
    // a page is where the mapping starts, so the mapping's first byte is at
    // the file's address `offset - p_offset + p_vaddr`.
    let segment = file.segments().find(|s| {
        let executable = match s.flags() {
            object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
            _ => false,
        };
        let (file_offset, size) = s.file_range();
        executable && (file_offset & !0xfff..file_offset + size).contains(&offset)
    })?;
    let (segment_offset, _) = segment.file_range();
    let svma_at_start = (offset + segment.address()).checked_sub(segment_offset)?;
    let base_avma = range.start.checked_sub(svma_at_start)?;

    let section_range = |name: &str| file.section_by_name(name).map(|s| s.address()..s.address() + s.size());
    let section_data =
        |name: &str| file.section_by_name(name).and_then(|s| s.data().ok()).map(<[u8]>::to_vec);
    let eh_frame = section_data(".eh_frame");
    let sections = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: section_range(".text"),
        got_svma: section_range(".got"),
        eh_frame_svma: section_range(".eh_frame"),
        eh_frame_hdr_svma: section_range(".eh_frame_hdr"),
        eh_frame_hdr: section_data(".eh_frame_hdr"),
        // Only objects without `.eh_frame` need `.debug_frame`.
        debug_frame: if eh_frame.is_none() { section_data(".debug_frame") } else { None },
        eh_frame,
        ..ExplicitModuleSectionInfo::default()
    };
    let module = Module::new(path.to_string(), range.clone(), base_avma, sections);
    let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
    let mapping = Mapping { path: path.to_string(), build_id, start: range.start, end: range.end, offset };
    Some((LoadedObject { mapping, base_avma }, module))
}
