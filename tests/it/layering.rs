//! The house stays as drawn: every module of `src/` imports only from the floors below its own,
//! in the order `src/lib.rs` declares them — the single source of truth for the layering.
//!
//! The walk follows the module tree from `src/lib.rs` as the compiler does (`mod x;` → `x.rs` or
//! `x/mod.rs`), with every cargo feature's modules. An import is a `crate::<module>` path anywhere
//! in a module's code (a `use`, a path in an expression or a type, a macro's tokens) or a `super::`
//! path that climbs out of its top-level module. Comments, strings and test code (`#[cfg(test)]`
//! items and the files they declare) do not count: a unit test may drive its module from above.
//!
//! Inside a folder the same holds one level down: a folder's face (its `mod.rs`, or the `x.rs`
//! beside an `x/` of child files) only declares its children and re-exports them, and a child
//! names what it uses through the sibling that defines it (`super::error::DecodeError`), never
//! through a face above it (`super::DecodeError`, `crate::decode::DecodeError`), test code
//! included: shared types have files of their own, so no import runs back up inside a folder.
//! Nor does one run in a circle: the files of a folder (a child folder as one) name each other,
//! in production code, one way only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// The floors `src/lib.rs` declares, top first: a `//` comment line before a run of `mod`
/// declarations starts a floor, and the modules declared under it share it.
#[derive(Debug)]
struct Floors {
    /// Top-level module → its floor (0 is the top).
    floor_of: BTreeMap<String, usize>,
    /// Each floor's comment, for messages.
    titles: Vec<String>,
}

fn read_floors(lib: &str) -> Result<Floors, String> {
    let mut floors = Floors { floor_of: BTreeMap::new(), titles: Vec::new() };
    let mut floor_has_modules = false;
    for line in lib.lines().map(str::trim) {
        if line.starts_with("//!") || line.is_empty() || line.starts_with("#[") {
            continue;
        }
        if let Some(comment) = line.strip_prefix("//") {
            if floor_has_modules || floors.titles.is_empty() {
                floors.titles.push(comment.trim().to_owned());
                floor_has_modules = false;
            } else if let Some(title) = floors.titles.last_mut() {
                title.push(' ');
                title.push_str(comment.trim());
            }
            continue;
        }
        let declared = line.strip_prefix("pub ").unwrap_or(line).strip_prefix("mod ").and_then(|m| m.strip_suffix(';'));
        if let Some(module) = declared {
            if floors.titles.is_empty() {
                return Err(format!("`{line}` comes before the first floor's comment"));
            }
            floors.floor_of.insert(module.to_owned(), floors.titles.len() - 1);
            floor_has_modules = true;
        }
    }
    Ok(floors)
}

/// One use of another top-level module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    file: PathBuf,
    line: usize,
    /// The top-level module the file belongs to, and the one it names.
    from: String,
    to: String,
}

/// What one file holds for the walk: the other modules it names, and the file modules it declares
/// (`mod x;`) with whether they are test-only.
#[derive(Debug, Default)]
struct Scanned {
    /// Top-level modules named, with their line.
    names: Vec<(String, usize)>,
    /// `mod x;` declarations: the module path below the file's and whether it is `#[cfg(test)]`.
    children: Vec<(Vec<String>, bool)>,
    /// Every `crate::` or `super::` path outside test code, from the crate root (`["decode",
    /// "error", "DecodeError"]`; a group `{a, b::c}` gives one path each), with its line.
    paths: Vec<(Vec<String>, usize)>,
    /// The same for test code (`#[cfg(test)]` items, and all of a test-only file).
    test_paths: Vec<(Vec<String>, usize)>,
    /// Items at the file's top level other than `mod` declarations and visible `use`s (a face must
    /// have none): a short description of each, with its line.
    items: Vec<(String, usize)>,
}

/// Scans the tokens of a file whose module path is `path` (`["backend", "trt", "build"]`).
fn scan_file(path: &[String], source: &str) -> Result<Scanned, String> {
    let tokens = TokenStream::from_str(source).map_err(|e| e.to_string())?;
    let top_level: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let mut scanned = Scanned { items: top_level_items(&top_level), ..Scanned::default() };
    scan(path, &[], tokens, &mut scanned);
    Ok(scanned)
}

/// The paths that start after `crate::` (or after the `super::`s that resolve to `base`) at `i`:
/// `a::b::C` gives `base + [a, b, C]`, a group gives one path per member; `self` in a group is the
/// path before it, a glob `*` is a segment of its own (it takes what the module holds), `as` ends a
/// path.
fn paths_at(tokens: &[TokenTree], i: usize, base: &[String]) -> Vec<Vec<String>> {
    match tokens.get(i) {
        Some(TokenTree::Ident(ident)) if ident == "self" => vec![base.to_vec()],
        Some(TokenTree::Ident(ident)) => {
            let here = [base, &[ident.to_string()]].concat();
            if is_path_separator(tokens, i + 1) {
                let more = paths_at(tokens, i + 3, &here);
                if !more.is_empty() {
                    return more;
                }
            }
            vec![here]
        }
        Some(TokenTree::Punct(star)) if star.as_char() == '*' => vec![[base, &["*".to_owned()]].concat()],
        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
            let members: Vec<TokenTree> = group.stream().into_iter().collect();
            let mut paths = Vec::new();
            let mut start = 0;
            for end in (0..=members.len()).filter(|&j| {
                j == members.len() || matches!(&members[j], TokenTree::Punct(comma) if comma.as_char() == ',')
            }) {
                if end > start {
                    paths.extend(paths_at(&members[start..end], 0, base));
                }
                start = end + 1;
            }
            paths
        }
        _ => Vec::new(),
    }
}

/// What stands at the top level of a file besides doc comments, attributes, `mod x;` and visible
/// `use`s: one description per item (`fn`, `struct`, a private `use`, an inline `mod x { … }`).
fn top_level_items(tokens: &[TokenTree]) -> Vec<(String, usize)> {
    let mut items = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        // Attributes (`#[…]`, `#![…]`, doc comments) belong to the item after them.
        if matches!(&tokens[i], TokenTree::Punct(hash) if hash.as_char() == '#') {
            i += if matches!(tokens.get(i + 1), Some(TokenTree::Punct(bang)) if bang.as_char() == '!') { 3 } else { 2 };
            continue;
        }
        let keyword = tokens[i..].iter().find_map(|token| match token {
            TokenTree::Ident(word) if word != "pub" => Some(word.to_string()),
            _ => None,
        });
        let is_use = keyword.as_deref() == Some("use");
        // A `use` ends at its `;`, braces of a group included; other items where `end_of_item` says.
        let end = if is_use {
            tokens[i..]
                .iter()
                .position(|token| matches!(token, TokenTree::Punct(p) if p.as_char() == ';'))
                .map_or(tokens.len(), |at| i + at + 1)
        } else {
            end_of_item(tokens, i)
        };
        let item = &tokens[i..end];
        let visible = matches!(item.first(), Some(TokenTree::Ident(word)) if word == "pub");
        if declared_module(item).is_none() && !(visible && is_use) {
            let line = item.first().map_or(0, |token| token.span().start().line);
            // Its first words, a body as `{ … }`: enough to find it.
            let words = item.iter().take(6).take_while(|token| !matches!(token, TokenTree::Group(_)));
            let mut text = words.cloned().collect::<TokenStream>().to_string();
            if item.len() > 6 || item.iter().any(|token| matches!(token, TokenTree::Group(_))) {
                text.push_str(" …");
            }
            items.push((text, line));
        }
        i = end;
    }
    items
}

/// `path` is the file's module path, `inline` the inline modules (`mod x { … }`) around `tokens`.
fn scan(path: &[String], inline: &[String], tokens: TokenStream, scanned: &mut Scanned) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        if is_cfg_test(&tokens, i) {
            let end = end_of_item(&tokens, i + 2);
            if let Some(module) = declared_module(&tokens[i + 2..end]) {
                scanned.children.push(([inline, &[module]].concat(), true));
            }
            // Test code imports no module above, but it too names siblings, not faces.
            let mut test_code = Scanned::default();
            scan(path, inline, tokens[i + 2..end].iter().cloned().collect(), &mut test_code);
            scanned.test_paths.extend(test_code.paths);
            scanned.test_paths.extend(test_code.test_paths);
            i = end;
            continue;
        }
        match &tokens[i] {
            TokenTree::Ident(ident) if ident == "crate" && is_path_separator(&tokens, i + 1) => {
                let line = ident.span().start().line;
                for name in first_segments(tokens.get(i + 3)) {
                    scanned.names.push((name, line));
                }
                scanned.paths.extend(paths_at(&tokens, i + 3, &[]).into_iter().map(|p| (p, line)));
                i += 3;
                continue;
            }
            TokenTree::Ident(ident) if ident == "super" && is_path_separator(&tokens, i + 1) => {
                let line = ident.span().start().line;
                let mut supers = 1;
                let mut next = i + 3;
                while matches!(tokens.get(next), Some(TokenTree::Ident(s)) if s == "super")
                    && is_path_separator(&tokens, next + 1)
                {
                    supers += 1;
                    next += 3;
                }
                // From inside `a::b` (a file or inline module), `super` twice is the crate root.
                if supers == path.len() + inline.len() {
                    for name in first_segments(tokens.get(next)) {
                        scanned.names.push((name, line));
                    }
                }
                if let Some(kept) = (path.len() + inline.len()).checked_sub(supers) {
                    let base: Vec<String> = path.iter().chain(inline).take(kept).cloned().collect();
                    scanned.paths.extend(paths_at(&tokens, next, &base).into_iter().map(|p| (p, line)));
                }
                i = next;
                continue;
            }
            TokenTree::Ident(ident) if ident == "mod" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    match tokens.get(i + 2) {
                        Some(TokenTree::Group(body)) if body.delimiter() == Delimiter::Brace => {
                            let inner = [inline, &[name.to_string()]].concat();
                            scan(path, &inner, body.stream(), scanned);
                            i += 3;
                            continue;
                        }
                        Some(TokenTree::Punct(semicolon)) if semicolon.as_char() == ';' => {
                            scanned.children.push(([inline, &[name.to_string()]].concat(), false));
                        }
                        _ => {}
                    }
                }
            }
            TokenTree::Group(group) => scan(path, inline, group.stream(), scanned),
            _ => {}
        }
        i += 1;
    }
}

/// `::` at `i`.
fn is_path_separator(tokens: &[TokenTree], i: usize) -> bool {
    matches!((tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
}

/// The first segment of the path that starts at `token`: `x` of `x::…`, or each one of `{x::…, y}`.
fn first_segments(token: Option<&TokenTree>) -> Vec<String> {
    match token {
        Some(TokenTree::Ident(ident)) => vec![ident.to_string()],
        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
            let mut names = Vec::new();
            let mut at_start = true;
            for token in group.stream() {
                match &token {
                    TokenTree::Ident(ident) if at_start && ident != "self" => names.push(ident.to_string()),
                    TokenTree::Punct(comma) if comma.as_char() == ',' => {
                        at_start = true;
                        continue;
                    }
                    _ => {}
                }
                at_start = false;
            }
            names
        }
        _ => Vec::new(),
    }
}

/// `#[cfg(test)]` at `i`.
fn is_cfg_test(tokens: &[TokenTree], i: usize) -> bool {
    let (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(attribute))) = (tokens.get(i), tokens.get(i + 1)) else {
        return false;
    };
    if hash.as_char() != '#' || attribute.delimiter() != Delimiter::Bracket {
        return false;
    }
    let inner: Vec<TokenTree> = attribute.stream().into_iter().collect();
    match inner.as_slice() {
        [TokenTree::Ident(cfg), TokenTree::Group(condition)] if cfg == "cfg" => {
            let condition: Vec<TokenTree> = condition.stream().into_iter().collect();
            matches!(condition.as_slice(), [TokenTree::Ident(test)] if test == "test")
        }
        _ => false,
    }
}

/// Where the item that starts at `i` (after its attributes, if any) ends: after its first `;` or
/// `{ … }` at this level.
fn end_of_item(tokens: &[TokenTree], i: usize) -> usize {
    let mut j = i;
    while j < tokens.len() {
        match &tokens[j] {
            TokenTree::Punct(punct) if punct.as_char() == ';' => return j + 1,
            TokenTree::Group(group) if group.delimiter() == Delimiter::Brace => return j + 1,
            _ => j += 1,
        }
    }
    j
}

/// The module an item declares, when it is `mod x;` or `mod x { … }` (with attributes or a
/// visibility before it).
fn declared_module(item: &[TokenTree]) -> Option<String> {
    let at = item.iter().position(|t| matches!(t, TokenTree::Ident(i) if i == "mod"))?;
    match (item.get(at + 1), item.get(at + 2)) {
        (Some(TokenTree::Ident(name)), Some(TokenTree::Punct(p))) if p.as_char() == ';' => Some(name.to_string()),
        _ => None,
    }
}

/// The file of module `name` declared in `parent` (a file of the crate): `name.rs` or
/// `name/mod.rs` in the parent's directory for `lib.rs` and `mod.rs`, else in `parent/`.
fn child_file(parent: &Path, inline: &[String], name: &str) -> Option<PathBuf> {
    let stem = parent.file_stem()?.to_str()?;
    let mut dir = parent.parent()?.to_path_buf();
    if stem != "lib" && stem != "mod" {
        dir.push(stem);
    }
    for module in inline {
        dir.push(module);
    }
    [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")].into_iter().find(|candidate| candidate.is_file())
}

/// One file of the crate as the walk read it.
#[derive(Debug)]
struct FileModule {
    file: PathBuf,
    /// Its module path (`["backend", "trt", "build"]`; empty for `lib.rs`).
    path: Vec<String>,
    /// The file modules it declares directly (`mod x;`, not inside an inline module).
    children: BTreeSet<String>,
    scanned: Scanned,
}

impl FileModule {
    /// A folder's face: a `mod.rs`, or an `x.rs` that declares files of `x/` other than its tests.
    /// The crate root is the floors' business, not a face.
    fn is_face(&self) -> bool {
        !self.path.is_empty()
            && (self.file.file_name().is_some_and(|name| name == "mod.rs")
                || self.scanned.children.iter().any(|(below, is_test)| below.len() == 1 && !is_test))
    }
}

/// Every file module of the crate at `src`, from `lib.rs` down (test-only ones included).
fn crate_modules(src: &Path) -> Result<Vec<FileModule>, String> {
    // (file, its module path, whether it is test-only), starting from the crate root.
    let mut pending = vec![(src.join("lib.rs"), Vec::<String>::new(), false)];
    let mut modules = Vec::new();
    while let Some((file, path, test_only)) = pending.pop() {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut scanned = scan_file(&path, &text).map_err(|e| format!("{}: {e}", file.display()))?;
        if test_only {
            scanned.names.clear();
            let paths = std::mem::take(&mut scanned.paths);
            scanned.test_paths.extend(paths);
        }
        let mut children = BTreeSet::new();
        for (below, is_test) in &scanned.children {
            let (name, inline) = below.split_last().ok_or("an empty module path")?;
            let child = child_file(&file, inline, name)
                .ok_or_else(|| format!("{}: no file for `mod {name};`", file.display()))?;
            if inline.is_empty() {
                children.insert(name.clone());
            }
            pending.push((child, [path.as_slice(), below].concat(), test_only || *is_test));
        }
        modules.push(FileModule { file, path, children, scanned });
    }
    Ok(modules)
}

/// Every import between top-level modules in the non-test code of the crate at `src`, and the
/// files the walk reached (test-only ones included).
fn crate_imports(src: &Path) -> Result<(Vec<Import>, BTreeSet<PathBuf>), String> {
    let mut reached = BTreeSet::new();
    let mut imports = Vec::new();
    for module in crate_modules(src)? {
        if let Some(from) = module.path.first() {
            for (to, line) in module.scanned.names.iter().filter(|(to, _)| to != from) {
                imports.push(Import { file: module.file.clone(), line: *line, from: from.clone(), to: to.clone() });
            }
        }
        reached.insert(module.file);
    }
    Ok((imports, reached))
}

/// The file's name for messages: relative to the repository.
fn shown(file: &Path) -> String {
    file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(file).display().to_string()
}

/// The paths that name something of a face above their file other than one of its child modules:
/// `super::DecodeError` or `crate::decode::DecodeError` from `src/decode/ssd.rs`.
fn through_faces(modules: &[FileModule]) -> Vec<String> {
    let by_path: BTreeMap<&[String], &FileModule> = modules.iter().map(|m| (m.path.as_slice(), m)).collect();
    let mut found = Vec::new();
    for module in modules {
        let mut paths: Vec<&(Vec<String>, usize)> =
            module.scanned.paths.iter().chain(&module.scanned.test_paths).collect();
        paths.sort_by_key(|(_, line)| *line);
        for (named, line) in paths {
            for depth in 1..module.path.len() {
                let ancestor = &module.path[..depth];
                let Some(face) = by_path.get(ancestor).filter(|face| face.is_face()) else { continue };
                match named.get(depth) {
                    Some(next) if named.starts_with(ancestor) && !face.children.contains(next) => found.push(format!(
                        "{}:{line}: `{}` is taken from {}; name the file beside it that defines `{next}`",
                        shown(&module.file),
                        named.join("::"),
                        shown(&face.file),
                    )),
                    _ => {}
                }
            }
        }
    }
    found
}

/// One folder's files as a graph: a file (or a child folder, as one node) → the siblings its
/// production code names → those imports, as `file:line: path`.
type SiblingGraph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// Every folder's sibling graph, by the folder's module path: a file below folder `f` names
/// sibling `x` when a path of its production code starts `f::x` and `x` is a file module the face
/// of `f` declares (`super::x::…`, `crate::f::x::…`, `super::super::x::…` from a child folder).
fn sibling_graphs(modules: &[FileModule]) -> BTreeMap<Vec<String>, SiblingGraph> {
    let by_path: BTreeMap<&[String], &FileModule> = modules.iter().map(|m| (m.path.as_slice(), m)).collect();
    let mut graphs: BTreeMap<Vec<String>, SiblingGraph> = BTreeMap::new();
    for module in modules {
        for depth in 1..module.path.len() {
            let folder = &module.path[..depth];
            let Some(face) = by_path.get(folder) else { continue };
            let node = &module.path[depth];
            for (named, line) in &module.scanned.paths {
                match named.get(depth) {
                    Some(sibling)
                        if sibling != node && named.starts_with(folder) && face.children.contains(sibling) =>
                    {
                        graphs
                            .entry(folder.to_vec())
                            .or_default()
                            .entry(node.clone())
                            .or_default()
                            .entry(sibling.clone())
                            .or_default()
                            .push(format!("{}:{line}: `{}`", shown(&module.file), named.join("::")));
                    }
                    _ => {}
                }
            }
        }
    }
    graphs
}

/// The circles among the files of each folder, one per node that is the least of a circle
/// through it (the shortest such circle), each as `src/f: a → b → a` and the imports it runs
/// through.
fn folder_circles(graphs: &BTreeMap<Vec<String>, SiblingGraph>) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, graph) in graphs {
        for start in graph.keys() {
            // Breadth first from `start` over nodes not less than it, back to `start`.
            let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut closed_by = None;
            while let Some(at) = queue.pop_front() {
                for next in graph.get(at).into_iter().flat_map(BTreeMap::keys).filter(|next| *next >= start) {
                    if next == start {
                        closed_by = Some(at);
                        break;
                    }
                    if !came_from.contains_key(next) {
                        came_from.insert(next, at);
                        queue.push_back(next);
                    }
                }
                if closed_by.is_some() {
                    break;
                }
            }
            let Some(mut at) = closed_by else { continue };
            let mut circle = vec![start, at];
            while at != start {
                at = came_from[at];
                circle.push(at);
            }
            circle.reverse();
            let mut text = format!(
                "src/{}: {}",
                folder.join("/"),
                circle.iter().map(|node| node.as_str()).collect::<Vec<_>>().join(" → ")
            );
            for step in circle.windows(2) {
                for import in &graph[step[0]][step[1]] {
                    text.push_str("\n    ");
                    text.push_str(import);
                }
            }
            found.push(text);
        }
    }
    found
}

/// What the faces hold besides declarations and re-exports.
fn face_items(modules: &[FileModule]) -> Vec<String> {
    modules
        .iter()
        .filter(|module| module.is_face())
        .flat_map(|module| {
            module.scanned.items.iter().map(|(item, line)| format!("{}:{line}: `{item}`", shown(&module.file)))
        })
        .collect()
}

/// The imports that break the floors: a module may name only modules on floors below its own.
fn violations(floors: &Floors, imports: &[Import]) -> Vec<String> {
    let describe = |module: &str| match floors.floor_of.get(module) {
        Some(&floor) => format!("`{module}` (floor {}: {})", floor + 1, floors.titles[floor]),
        None => format!("`{module}` (on no floor of src/lib.rs)"),
    };
    imports
        .iter()
        .filter(|import| match (floors.floor_of.get(&import.from), floors.floor_of.get(&import.to)) {
            (Some(from), Some(to)) => to <= from,
            _ => true,
        })
        .map(|import| {
            format!(
                "{}:{}: {} imports {}",
                shown(&import.file),
                import.line,
                describe(&import.from),
                describe(&import.to)
            )
        })
        .collect()
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_imports_only_from_the_floors_below_its_own_in_lib_rs() {
    let src = src_dir();
    let floors = read_floors(&std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs")).expect("floors");
    assert!(floors.titles.len() >= 5, "src/lib.rs declares its modules floor by floor: {floors:?}");
    let (imports, _) = crate_imports(&src).expect("the walk of src/");
    let broken = violations(&floors, &imports);
    assert!(
        broken.is_empty(),
        "imports against the floors of src/lib.rs (a module imports only from floors below its own; move the \
         code, or change the floors in src/lib.rs and DESIGN.md's layout on purpose):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_walk_reaches_every_source_file() {
    fn rust_files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("list src/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.insert(path);
            }
        }
    }
    let src = src_dir();
    let mut files = BTreeSet::new();
    rust_files(&src, &mut files);
    files.remove(&src.join("main.rs"));
    let (_, reached) = crate_imports(&src).expect("the walk of src/");
    let missed: Vec<_> = files.difference(&reached).collect();
    assert!(missed.is_empty(), "files the layering walk never read (declared in an unusual way?): {missed:?}");
}

/// The checker itself: an upward import is reported with its file and line, wherever it hides;
/// comments, strings and test code are not imports.
#[test]
fn an_upward_import_is_reported_and_comments_strings_and_tests_are_not() {
    let floors = read_floors(
        "//! doc\n\n// top\npub mod cmd;\n// middle, two\n// lines\npub mod decode;\n#[cfg(feature = \"x\")]\npub mod \
         gpu;\n// bottom\npub mod sys;\n",
    )
    .expect("floors");
    assert_eq!(floors.titles, ["top", "middle, two lines", "bottom"]);
    assert_eq!(floors.floor_of["gpu"], 1);
    let source = r#"
        //! Mentions crate::cmd in its doc, and `crate::cmd::x` here.
        use crate::sys::files;
        use crate::{decode::Decoder, sys};
        const TEXT: &str = "crate::cmd::run";
        fn f() { let _ = crate::cmd::run(); }
        mod inner { use super::super::super::cmd; }
        #[cfg(test)]
        mod tests { use crate::cmd::run; }
        #[cfg(test)]
        mod test_support;
    "#;
    let scanned = scan_file(&["decode".into(), "ssd".into()], source).expect("tokens");
    assert_eq!(scanned.children, [(vec!["test_support".to_owned()], true)]);
    let imports: Vec<Import> = scanned
        .names
        .into_iter()
        .filter(|(to, _)| to != "decode")
        .map(|(to, line)| Import { file: "src/decode/ssd.rs".into(), line, from: "decode".into(), to })
        .collect();
    let broken = violations(&floors, &imports);
    assert_eq!(
        broken,
        [
            "src/decode/ssd.rs:6: `decode` (floor 2: middle, two lines) imports `cmd` (floor 1: top)",
            "src/decode/ssd.rs:7: `decode` (floor 2: middle, two lines) imports `cmd` (floor 1: top)",
        ],
        "{imports:?}"
    );
    let peers = [Import { file: "src/gpu/mod.rs".into(), line: 1, from: "gpu".into(), to: "decode".into() }];
    assert_eq!(violations(&floors, &peers).len(), 1, "modules of one floor do not import each other");
}

#[test]
fn a_folders_face_only_declares_its_files_and_re_exports_them() {
    let modules = crate_modules(&src_dir()).expect("the walk of src/");
    let held = face_items(&modules);
    assert!(
        held.is_empty(),
        "a folder's mod.rs (or the x.rs beside x/) only declares and re-exports; give what it holds a file of its \
         own beside it:\n{}",
        held.join("\n")
    );
}

#[test]
fn no_file_takes_what_it_uses_from_the_face_of_a_folder_it_is_in() {
    let modules = crate_modules(&src_dir()).expect("the walk of src/");
    let up = through_faces(&modules);
    assert!(
        up.is_empty(),
        "inside a folder, a file names the sibling that defines what it uses, never the folder's mod.rs (an import \
         back up):\n{}",
        up.join("\n")
    );
}

/// The checker of folders' insides: a child that takes a shared type from its face is reported,
/// however it spells the path, test code included; a sibling named through the face is not; a
/// face that holds code is reported item by item.
#[test]
fn a_child_that_imports_its_face_is_reported_and_one_that_names_a_sibling_is_not() {
    let face_source =
        "//! doc\n#![allow(x)]\nmod error;\npub mod ssd;\n#[cfg(test)]\nmod support;\npub use error::E;\n\
                       pub(crate) use ssd::f;\nuse std::fmt;\npub struct Params;\nmod inline { }\n";
    let child_source = r#"
        use super::error::E;
        use super::{ssd, Params};
        use crate::decode::{error::E as F, Params as P};
        fn f() { let _ = crate::decode::Params; let _ = crate::detection::Labels::new(); }
        #[cfg(test)]
        mod tests { use super::*; use super::super::Params; use super::super::support::*; }
        use super::*;
    "#;
    let face_scan = scan_file(&["decode".into()], face_source).expect("tokens");
    let items: Vec<&str> = face_scan.items.iter().map(|(item, _)| item.as_str()).collect();
    assert_eq!(items, ["use std :: fmt ;", "pub struct Params ;", "mod inline …"]);
    let face = FileModule {
        file: "src/decode/mod.rs".into(),
        path: vec!["decode".into()],
        children: ["detr", "error", "ssd", "support"].map(String::from).into(),
        scanned: face_scan,
    };
    let child = FileModule {
        file: "src/decode/detr.rs".into(),
        path: vec!["decode".into(), "detr".into()],
        children: BTreeSet::new(),
        scanned: scan_file(&["decode".into(), "detr".into()], child_source).expect("tokens"),
    };
    let found = through_faces(&[face, child]);
    let lines: Vec<&str> = found.iter().map(|f| f.split(": ").next().unwrap_or_default()).collect();
    assert_eq!(
        lines,
        [
            "src/decode/detr.rs:3",
            "src/decode/detr.rs:4",
            "src/decode/detr.rs:5",
            "src/decode/detr.rs:7",
            "src/decode/detr.rs:8"
        ]
    );
    assert!(found[0].contains("`decode::Params` is taken from src/decode/mod.rs"), "{found:?}");
}

#[test]
fn no_folder_has_a_circle_among_its_files() {
    let modules = crate_modules(&src_dir()).expect("the walk of src/");
    let circles = folder_circles(&sibling_graphs(&modules));
    assert!(
        circles.is_empty(),
        "inside a folder, the files (a child folder as one) name each other one way only; move what both sides \
         need into a file of its own beside them:\n{}",
        circles.join("\n")
    );
}

/// The checker of circles inside a folder: two files that name each other are reported with the
/// imports on the way, a child folder counting as one file and test code not counting; a chain
/// is not a circle.
#[test]
fn a_circle_of_two_files_is_reported_and_a_chain_is_not() {
    let file = |path: &[&str], source: &str| {
        let path: Vec<String> = path.iter().map(|segment| segment.to_string()).collect();
        FileModule {
            file: format!("src/{}.rs", path.join("/")).into(),
            scanned: scan_file(&path, source).expect("tokens"),
            path,
            children: BTreeSet::new(),
        }
    };
    let mut face = file(&["decode"], "mod a;\nmod b;\nmod c;\n");
    face.children = ["a", "b", "c"].map(String::from).into();
    let modules = [
        face,
        file(&["decode", "a"], "use super::b::X;\n"),
        file(&["decode", "b", "inner"], "fn f() {\n    let _ = crate::decode::a::Y;\n}\n"),
        file(&["decode", "c"], "use super::a::Y;\n"),
    ];
    assert_eq!(
        folder_circles(&sibling_graphs(&modules)),
        ["src/decode: a → b → a\n    src/decode/a.rs:1: `decode::b::X`\n    src/decode/b/inner.rs:2: `decode::a::Y`"]
    );
    let mut face = file(&["decode"], "mod a;\nmod b;\nmod c;\n");
    face.children = ["a", "b", "c"].map(String::from).into();
    let chain = [
        face,
        file(&["decode", "c"], "use super::a::Y;\n"),
        file(&["decode", "a"], "use super::b::X;\n"),
        file(&["decode", "b"], "#[cfg(test)]\nmod tests { use super::super::a::Y; use super::super::c; }\n"),
    ];
    let graphs = sibling_graphs(&chain);
    assert_eq!(graphs[&vec!["decode".to_owned()]].len(), 2, "c → a → b: {graphs:?}");
    assert_eq!(folder_circles(&graphs), Vec::<String>::new());
}
