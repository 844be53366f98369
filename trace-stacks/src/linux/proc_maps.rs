//! The executable mappings of this process, from `/proc/self/maps`.

/// One executable mapping: `start-end perms offset dev inode path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExecMapping {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) offset: u64,
    /// A file's path, or a kernel name in brackets (`[vdso]`).
    pub(crate) path: String,
}

/// The executable mappings that belong to an object: a file, or the vdso.
/// Anonymous executable memory (a JIT) has no unwind information to read.
pub(crate) fn exec_mappings() -> Vec<ExecMapping> {
    match std::fs::read_to_string("/proc/self/maps") {
        Ok(text) => text.lines().filter_map(parse_line).collect(),
        Err(_) => Vec::new(),
    }
}

fn parse_line(line: &str) -> Option<ExecMapping> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let is_object = path.starts_with('/') && !path.ends_with(" (deleted)") || path == "[vdso]";
    if !is_object {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some(ExecMapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        path: path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_executable_mappings_of_files_and_the_vdso_are_kept() {
        let cases = [
            (
                "55d0c5a00000-55d0c5b00000 r-xp 00012000 fd:01 1234    /usr/bin/tool",
                Some((0x55d0c5a00000, 0x55d0c5b00000, 0x12000, "/usr/bin/tool")),
            ),
            (
                "7ffd1e9f0000-7ffd1e9f2000 r-xp 00000000 00:00 0                          [vdso]",
                Some((0x7ffd1e9f0000, 0x7ffd1e9f2000, 0, "[vdso]")),
            ),
            ("55d0c5b00000-55d0c5c00000 r--p 00112000 fd:01 1234    /usr/bin/tool", None),
            ("7f0000000000-7f0000001000 rwxp 00000000 00:00 0 ", None),
            ("7f0000000000-7f0000001000 r-xp 00000000 fd:01 99  /tmp/gone (deleted)", None),
            ("7ffd1e9d0000-7ffd1e9f0000 rw-p 00000000 00:00 0                          [stack]", None),
            (
                "7f0000000000-7f0000001000 r-xp 00001000 fd:01 99  /opt/a dir/lib x.so",
                Some((0x7f0000000000, 0x7f0000001000, 0x1000, "/opt/a dir/lib x.so")),
            ),
        ];
        for (line, expected) in cases {
            let parsed = parse_line(line).map(|m| (m.start, m.end, m.offset, m.path));
            let expected = expected.map(|(s, e, o, p)| (s, e, o, p.to_string()));
            assert_eq!(parsed, expected, "{line}");
        }
    }

    #[test]
    fn this_process_has_its_own_binary_mapped_executable() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mappings = exec_mappings();
        assert!(mappings.iter().any(|m| std::path::Path::new(&m.path) == exe), "{mappings:?}");
    }
}
