//! The probe browser's model: provider → module → function → name, built from the catalog's
//! probes (with how often each fired in the trace, when known), an incremental filter, and
//! which nodes are open.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::lang::describe::{Field, TypeBook};
use crate::probes::ProbeInfo;

/// One visible row of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// 0 provider, 1 module, 2 function, 3 probe name.
    pub depth: usize,
    pub label: String,
    /// The description this row stands for (`sched:::`, `syscall::read:`, ...).
    pub desc: String,
    /// The probe of a leaf row (index into the probe list).
    pub probe: Option<usize>,
    /// Firings in the trace under this row, when the counts are known.
    pub count: Option<u64>,
    pub open: bool,
    pub leaf: bool,
}

#[derive(Default)]
struct Node {
    children: BTreeMap<String, Node>,
    /// The description the node stands for.
    desc: String,
    probe: Option<usize>,
    count: u64,
}

pub struct ProbeTree {
    pub probes: Vec<ProbeInfo>,
    counts: Option<HashMap<u64, u64>>,
    pub filter: String,
    open: HashSet<String>,
    rows: Vec<Row>,
    pub selected: usize,
    /// The members of argument types looked up so far (the type library loads on first use).
    fields: std::cell::RefCell<ArgFields>,
}

/// What the browser knows of argument types: the library, and each type's members.
#[derive(Default)]
struct ArgFields {
    book: Option<Option<TypeBook>>,
    known: HashMap<String, Option<Vec<Field>>>,
}

/// One argument of the selected probe, with the members of the struct it points to (for a
/// translated argument, the translated struct's: `fileinfo_t *` shows `fi_pathname`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgDetail {
    pub index: usize,
    pub ty: String,
    pub fields: Vec<Field>,
}

impl ProbeTree {
    pub fn new(mut probes: Vec<ProbeInfo>) -> Self {
        probes.sort_by(|a, b| {
            (&a.provider, &a.module, &a.function, &a.name).cmp(&(
                &b.provider,
                &b.module,
                &b.function,
                &b.name,
            ))
        });
        let mut t = ProbeTree {
            probes,
            counts: None,
            filter: String::new(),
            open: HashSet::new(),
            rows: Vec::new(),
            selected: 0,
            fields: Default::default(),
        };
        t.rebuild();
        t
    }

    /// Sets how often each probe (by id) fired in the trace; the tree shows the totals.
    pub fn set_counts(&mut self, counts: HashMap<u64, u64>) {
        self.counts = Some(counts);
        self.rebuild();
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.rows.get(self.selected)
    }

    /// The probe of the selected row, when it is a leaf.
    pub fn selected_probe(&self) -> Option<&ProbeInfo> {
        self.selected_row()
            .and_then(|r| r.probe)
            .and_then(|i| self.probes.get(i))
    }

    pub fn set_filter(&mut self, f: &str) {
        self.filter = f.to_string();
        self.selected = 0;
        self.rebuild();
    }

    /// Opens or closes the selected node.
    pub fn toggle(&mut self) {
        if let Some(r) = self.rows.get(self.selected) {
            if r.leaf {
                return;
            }
            let d = r.desc.clone();
            if !self.open.remove(&d) {
                self.open.insert(d);
            }
            self.rebuild();
        }
    }

    pub fn set_open(&mut self, open: bool) {
        if let Some(r) = self.rows.get(self.selected) {
            let d = r.desc.clone();
            if open && !r.leaf {
                self.open.insert(d);
            } else if !open && !self.open.remove(&d) {
                // on a closed node or a leaf, go to the parent
                let depth = r.depth;
                if depth > 0 {
                    if let Some(p) = self.rows[..self.selected]
                        .iter()
                        .rposition(|x| x.depth < depth)
                    {
                        self.selected = p;
                    }
                }
            }
            self.rebuild();
        }
    }

    pub fn move_by(&mut self, delta: isize) {
        if self.rows.is_empty() {
            self.selected = 0;
            return;
        }
        let n = self.rows.len() as isize;
        self.selected = (self.selected as isize + delta).clamp(0, n - 1) as usize;
    }

    /// The selected probe's arguments, with the members of their structs.
    pub fn arg_details(&self) -> Vec<ArgDetail> {
        let Some(p) = self.selected_probe() else {
            return Vec::new();
        };
        let mut cache = self.fields.borrow_mut();
        let cache = &mut *cache;
        p.arg_types
            .iter()
            .enumerate()
            .map(|(index, ty)| {
                let fields = cache
                    .known
                    .entry(ty.clone())
                    .or_insert_with(|| {
                        cache
                            .book
                            .get_or_insert_with(TypeBook::new)
                            .as_mut()
                            .and_then(|b| b.fields(ty))
                    })
                    .clone()
                    .unwrap_or_default();
                ArgDetail {
                    index,
                    ty: ty.clone(),
                    fields,
                }
            })
            .collect()
    }

    /// A clause for the selected row, to insert into the editor.
    pub fn skeleton(&self) -> Option<String> {
        let r = self.selected_row()?;
        let mut s = format!("{}\n{{\n", r.desc);
        match self.selected_probe() {
            Some(p) if !p.arg_types.is_empty() => {
                s.push_str("\t/* ");
                for (i, t) in p.arg_types.iter().enumerate() {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    s.push_str(&format!("args[{i}]: {t}"));
                }
                s.push_str(" */\n");
            }
            _ => {}
        }
        s.push_str(&clause_body(self.selected_probe(), &r.desc));
        s.push_str("}\n");
        Some(s)
    }

    fn rebuild(&mut self) {
        let needle = self.filter.to_ascii_lowercase();
        let mut root = Node::default();
        for (i, p) in self.probes.iter().enumerate() {
            if !needle.is_empty() {
                let full = format!("{}:{}:{}:{}", p.provider, p.module, p.function, p.name)
                    .to_ascii_lowercase();
                if !full.contains(&needle) {
                    continue;
                }
            }
            let c = self
                .counts
                .as_ref()
                .and_then(|m| m.get(&p.id).copied())
                .unwrap_or(0);
            let mut n = &mut root;
            n.count += c;
            let fields = [&p.provider, &p.module, &p.function, &p.name];
            for (level, part) in fields.iter().enumerate() {
                // empty modules and functions (most ETW probes) get no level of their own
                if part.is_empty() && (level == 1 || level == 2) {
                    continue;
                }
                let mut parts: Vec<&str> = fields[..=level].iter().map(|s| s.as_str()).collect();
                parts.resize(4, "");
                n = n.children.entry((*part).clone()).or_default();
                n.desc = parts.join(":");
                n.count += c;
            }
            n.probe = Some(i);
        }
        let mut rows = Vec::new();
        let all_open = !needle.is_empty();
        let known = self.counts.is_some();
        walk(&root, 0, &self.open, all_open, known, &mut rows);
        self.rows = rows;
        if self.selected >= self.rows.len() {
            self.selected = self.rows.len().saturating_sub(1);
        }
    }
}

/// Orders names as people read them: runs of digits by their value (`profile-97` before
/// `profile-1000`, `tick-5s` before `tick-10s`), the rest as text.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                // leading zeros aside, a longer run is a larger number
                let (na, nb) = (trim_zeros(&a[..da]), trim_zeros(&b[..db]));
                let o = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
                if o != Ordering::Equal {
                    return o;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

/// The body of the clause Enter inserts for a probe: what is most worth seeing for it (by
/// process, by function, bytes of I/O by file, samples by stack, ...); for a row that is not
/// one probe, counts by process and probe.
fn clause_body(p: Option<&ProbeInfo>, desc: &str) -> String {
    let provider = desc.split(':').next().unwrap_or("");
    let name = p.map_or("", |p| p.name.as_str());
    let base = provider.trim_end_matches(|c: char| c.is_ascii_digit() || c == '$');
    let body = match (base, name) {
        ("dtrace", "BEGIN") => "printf(\"tracing... Ctrl-C to end\\n\");",
        ("dtrace", _) => "printf(\"%s\\n\", probename);",
        ("profile", n) if n.starts_with("tick-") => "printf(\"%Y\\n\", walltimestamp);",
        ("profile", _) => "@[execname, stack(5)] = count();",
        ("syscall", _) => "@[execname, probefunc] = count();",
        ("io", _) => "@[execname, args[2]->fi_pathname] = sum(args[0]->b_bcount);",
        ("fsinfo", _) => "@[execname, args[0]->fi_pathname] = count();",
        ("sched", "off-cpu") => "@[execname] = count();",
        ("proc", "start" | "exec-success") => {
            "printf(\"%d %s %s\\n\", pid, execname, curpsinfo->pr_psargs);"
        }
        ("proc", _) => "printf(\"%d %s %s\\n\", pid, execname, probename);",
        ("pid" | "fpid", "return") => "@[probefunc] = quantize(arg1);",
        ("pid" | "fpid", _) => "@[probefunc, ustack(5)] = count();",
        _ => "@[execname, probename] = count();",
    };
    format!("\t{body}\n")
}

/// A skeleton's anonymous aggregation (`@[...]`) named after its provider (`@syscall[...]`,
/// `@syscall2` when the script has that name already), so that it does not meet the script's
/// own `@` with other keys (a key mismatch the moment it is inserted).
pub fn name_aggregation(skeleton: &str, script: &str) -> String {
    if !skeleton.contains("@[") {
        return skeleton.to_string();
    }
    let base: String = skeleton
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect::<String>()
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .to_string();
    let base = if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
        "probe".to_string()
    } else {
        base
    };
    let used = |n: &str| {
        script.match_indices(&format!("@{n}")).any(|(i, m)| {
            !script[i + m.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let name = std::iter::once(base.clone())
        .chain((2..).map(|i| format!("{base}{i}")))
        .find(|n| !used(n))
        .unwrap_or(base);
    skeleton.replace("@[", &format!("@{name}["))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let z = d.iter().take_while(|&&c| c == b'0').count();
    &d[z..]
}

fn walk(
    n: &Node,
    depth: usize,
    open: &HashSet<String>,
    all_open: bool,
    known: bool,
    rows: &mut Vec<Row>,
) {
    let mut children: Vec<(&String, &Node)> = n.children.iter().collect();
    children.sort_by(|a, b| natural_cmp(a.0, b.0));
    for (name, child) in children {
        let leaf = child.children.is_empty();
        let is_open = all_open || open.contains(&child.desc);
        rows.push(Row {
            depth,
            label: if name.is_empty() {
                "(none)".into()
            } else {
                name.clone()
            },
            desc: child.desc.clone(),
            probe: child.probe,
            count: known.then_some(child.count),
            open: is_open && !leaf,
            leaf,
        });
        if is_open && !leaf {
            walk(child, depth + 1, open, all_open, known, rows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(id: u64, p: &str, m: &str, f: &str, n: &str) -> ProbeInfo {
        ProbeInfo {
            id,
            provider: p.into(),
            module: m.into(),
            function: f.into(),
            name: n.into(),
            arg_types: vec!["int".into()],
            arg_native: Vec::new(),
        }
    }

    fn tree() -> ProbeTree {
        ProbeTree::new(vec![
            probe(1, "sched", "", "", "on-cpu"),
            probe(2, "sched", "", "", "off-cpu"),
            probe(3, "syscall", "", "NtReadFile", "entry"),
            probe(4, "syscall", "", "NtReadFile", "return"),
        ])
    }

    #[test]
    fn opens_filters_and_counts() {
        let mut t = tree();
        let labels: Vec<&str> = t.rows().iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["sched", "syscall"]);
        t.toggle();
        let labels: Vec<&str> = t.rows().iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["sched", "off-cpu", "on-cpu", "syscall"]);
        t.set_filter("ntread");
        let leaves: Vec<&str> = t
            .rows()
            .iter()
            .filter(|r| r.leaf)
            .map(|r| r.desc.as_str())
            .collect();
        assert_eq!(
            leaves,
            ["syscall::NtReadFile:entry", "syscall::NtReadFile:return"]
        );
        t.set_filter("");
        t.set_counts([(1, 5), (2, 7), (3, 1)].into_iter().collect());
        assert_eq!(t.rows()[0].count, Some(12));
    }

    #[test]
    fn skeleton_for_a_probe() {
        let mut t = tree();
        t.set_filter("on-cpu");
        t.selected = t.rows().iter().position(|r| r.leaf).unwrap();
        let s = t.skeleton().unwrap();
        assert!(s.starts_with("sched:::on-cpu\n{\n"), "{s}");
        assert!(s.contains("args[0]: int"));
        assert!(crate::engine::standalone::standalone_vm(
            "BEGIN\n{\n\t@[probefunc] = count();\n}\n"
        )
        .is_ok());
    }
}

#[cfg(test)]
mod console_edges {
    use super::*;
    use crate::probes::ProbeCatalog;

    #[test]
    fn numbers_sort_as_numbers() {
        let mut v = vec![
            "profile-997",
            "profile-97",
            "profile-1999",
            "tick-10s",
            "tick-5s",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "profile-97",
                "profile-997",
                "profile-1999",
                "tick-5s",
                "tick-10s"
            ]
        );
        assert_eq!(natural_cmp("a007", "a7"), std::cmp::Ordering::Equal);
        assert_eq!(natural_cmp("a", "a1"), std::cmp::Ordering::Less);
        let t = ProbeTree::new(crate::providers::standard_catalog().list());
        let names: Vec<&str> = t.rows().iter().map(|r| r.label.as_str()).collect();
        assert!(names.contains(&"profile"), "{names:?}");
    }

    #[test]
    fn every_listed_probe_gets_a_clause_that_compiles() {
        let etw = crate::providers::etw::EtwProbes::new();
        let catalog = crate::providers::etw_catalog(&etw);
        let probes = catalog.list();
        assert!(probes.len() > 100);
        let mut bodies = HashSet::new();
        for p in &probes {
            let desc = format!("{}:{}:{}:{}", p.provider, p.module, p.function, p.name);
            let body = clause_body(Some(p), &desc);
            let text = format!("{desc}\n{{\n{body}}}\n");
            if let Err(d) = crate::tui::compile::compile_text(&text, "x.d", &catalog) {
                panic!("{text}: {}", d.render(true));
            }
            bodies.insert(body);
        }
        // not one clause for everything
        assert!(bodies.len() >= 6, "{bodies:?}");
        // a provider row (no single probe) counts by process and probe
        let text = format!("sched:::\n{{\n{}}}\n", clause_body(None, "sched:::"));
        assert!(crate::tui::compile::compile_text(&text, "x.d", &catalog).is_ok());
    }

    #[test]
    fn an_inserted_clause_does_not_meet_the_scripts_aggregation() {
        let etw = crate::providers::etw::EtwProbes::new();
        let catalog = crate::providers::etw_catalog(&etw);
        let script = "BEGIN { @[1, 2, 3] = count(); @sched = count(); }\n";
        let skel = format!("sched:::\n{{\n{}}}\n", clause_body(None, "sched:::"));
        let named = name_aggregation(&skel, script);
        assert!(named.contains("@sched2[execname, probename]"), "{named}");
        let text = format!("{script}{named}");
        if let Err(d) = crate::tui::compile::compile_text(&text, "x.d", &catalog) {
            panic!("{text}: {}", d.render(true));
        }
        // the anonymous one as it was would not compile (keys of another shape)
        let text = format!("{script}{skel}");
        assert!(crate::tui::compile::compile_text(&text, "x.d", &catalog).is_err());
        assert_eq!(
            name_aggregation("BEGIN\n{\n\tprintf(\"x\");\n}\n", script),
            "BEGIN\n{\n\tprintf(\"x\");\n}\n"
        );
    }
}
