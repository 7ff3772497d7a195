// A small parser for include/blitz.h, shared by build.rs (which generates
// the C probe from it) and tests/abi_mirror.rs (which compares the header
// with the Rust declarations). It understands exactly the constructs the
// header promises to use: object-like `#define BLZ_*` constants, one enum
// of named values, `typedef struct X X;` (opaque handles),
// `typedef struct X { fields } X;` (a field may be an array of a constant
// length), scalar typedefs, function-pointer typedefs, `BLZ_API`
// prototypes and `BLZ_API extern` variables. Anything else between those is an
// error, so a new kind of declaration cannot slip past the mirror test.
//
// C types are given in a canonical spelling: the words, then one `*` per
// level of indirection, e.g. "const blz_pool_config*", "blz_pool**", "void*";
// an array field's type ends with its length: "uintptr_t[8]".
#![allow(dead_code)]

/// A function or function-pointer typedef: its name, its return type and
/// its parameter types ("void" for no return value; no parameters for `(void)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proto {
    pub name: String,
    pub ret: String,
    pub params: Vec<String>,
}

/// A struct field: its name and canonical C type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: String,
}

/// Everything the header declares.
#[derive(Debug, Default)]
pub struct Header {
    /// `#define BLZ_*` constants and enum members, in header order.
    pub constants: Vec<String>,
    /// Named enums and their members.
    pub enums: Vec<(String, Vec<String>)>,
    /// Structs with a body: name and fields in order.
    pub structs: Vec<(String, Vec<Field>)>,
    /// `typedef struct X X;` without a body: opaque handle types.
    pub opaque: Vec<String>,
    /// `typedef <scalar> name;`: (name, canonical C type).
    pub scalars: Vec<(String, String)>,
    /// `typedef ret (*name)(params);`
    pub callbacks: Vec<Proto>,
    /// `BLZ_API ret name(params);`
    pub functions: Vec<Proto>,
    /// `BLZ_API extern [__thread] type name [__attribute__((...))];`: (name, canonical C type).
    pub variables: Vec<(String, String)>,
}

/// Whether a macro body is an integer constant expression: numbers,
/// operators and other BLZ_ names only. Anything else (`BLZ_API`'s
/// `__attribute__((visibility("default")))`, an empty body) is an
/// attribute-like macro, removed from the declarations before parsing.
fn is_value(body: &str) -> bool {
    let body = body.trim();
    !body.is_empty()
        && body.chars().all(|c| c.is_alphanumeric() || c == '_' || c.is_whitespace() || "+-*/%()<>|&^~".contains(c))
        && body
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .all(|w| w.starts_with("BLZ_") || w.starts_with(|c: char| c.is_ascii_digit()))
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'/' && i + 1 < bytes.len() && bytes[i + 1] == b'*' {
            let end = text[i + 2..].find("*/").map(|e| i + 2 + e + 2).unwrap_or(bytes.len());
            // keep line structure for the preprocessor pass
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            i = end;
        } else if bytes[i] == b'/' && i + 1 < bytes.len() && bytes[i + 1] == b'/' {
            let end = text[i..].find('\n').map(|e| i + e).unwrap_or(bytes.len());
            i = end;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Splits "const blz_pool *pool" into words and stars: (["const", "blz_pool", "pool"], stars).
fn words_and_stars(decl: &str) -> (Vec<String>, Vec<usize>) {
    // stars[k] = number of '*' after word k
    let mut words: Vec<String> = Vec::new();
    let mut stars: Vec<usize> = Vec::new();
    let mut current = String::new();
    for c in decl.chars() {
        if c.is_alphanumeric() || c == '_' {
            current.push(c);
        } else {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
                stars.push(0);
            }
            if c == '*' {
                match stars.last_mut() {
                    Some(s) => *s += 1,
                    None => panic!("blitz.h: '*' before a type in {:?}", decl),
                }
            } else if !c.is_whitespace() {
                panic!("blitz.h: unexpected {:?} in declaration {:?}", c, decl);
            }
        }
    }
    if !current.is_empty() {
        words.push(current);
        stars.push(0);
    }
    (words, stars)
}

/// The canonical type of a declaration with a name ("size_t begin", "blz_pool **out").
/// Returns (type, name).
pub fn split_named(decl: &str) -> (String, String) {
    let (mut words, stars) = words_and_stars(decl);
    assert!(words.len() >= 2, "blitz.h: declaration without a name: {:?}", decl);
    let name = words.pop().unwrap();
    let nstars: usize = stars.iter().sum();
    (format!("{}{}", words.join(" "), "*".repeat(nstars)), name)
}

/// The canonical spelling of a type without a name ("void", "const char *").
pub fn canonical_type(decl: &str) -> String {
    let (words, stars) = words_and_stars(decl);
    let nstars: usize = stars.iter().sum();
    format!("{}{}", words.join(" "), "*".repeat(nstars))
}

fn parse_params(list: &str) -> Vec<String> {
    let list = list.trim();
    if list == "void" || list.is_empty() {
        return Vec::new();
    }
    list.split(',').map(|p| split_named(p).0).collect()
}

fn is_ident(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_') && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// "ret name(params)" → Proto.
fn parse_proto(text: &str) -> Proto {
    let open = text.find('(').expect("blitz.h: prototype without '('");
    let close = text.rfind(')').expect("blitz.h: prototype without ')'");
    let (ret, name) = split_named(&text[..open]);
    Proto { name, ret, params: parse_params(&text[open + 1..close]) }
}

/// Parses the header's text.
pub fn parse(text: &str) -> Header {
    let text = strip_comments(text);
    let mut header = Header::default();

    // Pass 1: preprocessor lines. Constants are object-like BLZ_ macros;
    // `#ifdef __cplusplus` blocks (the extern "C" wrapper) are skipped.
    let mut code = String::new();
    let mut attributes: Vec<String> = Vec::new();
    let mut skipping_cplusplus = false;
    let mut depth = 0usize; // #if nesting inside a skipped block
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut line = line.to_string();
        while line.ends_with('\\') {
            line.pop();
            line.push(' ');
            line.push_str(lines.next().unwrap_or(""));
        }
        let t = line.trim();
        if let Some(directive) = t.strip_prefix('#') {
            let directive = directive.trim_start();
            if skipping_cplusplus {
                if directive.starts_with("if") {
                    depth += 1;
                } else if directive.starts_with("endif") {
                    if depth == 0 {
                        skipping_cplusplus = false;
                    } else {
                        depth -= 1;
                    }
                }
                continue;
            }
            if directive.starts_with("ifdef") && directive[5..].trim() == "__cplusplus" {
                skipping_cplusplus = true;
                depth = 0;
                continue;
            }
            if let Some(rest) = directive.strip_prefix("define") {
                let rest = rest.trim_start();
                let name_end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
                let name = &rest[..name_end];
                let function_like = rest[name_end..].starts_with('(');
                if name.starts_with("BLZ_") && !function_like {
                    if is_value(&rest[name_end..]) {
                        if !header.constants.iter().any(|c| c == name) {
                            header.constants.push(name.to_string());
                        }
                    } else if !attributes.iter().any(|a| a == name) {
                        attributes.push(name.to_string());
                    }
                }
            }
            continue;
        }
        if !skipping_cplusplus {
            code.push_str(&line);
            code.push('\n');
        }
    }

    // Pass 2: statements at brace depth 0, ended by ';'.
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut braces = 0i32;
    for c in code.chars() {
        match c {
            '{' => braces += 1,
            '}' => braces -= 1,
            _ => {}
        }
        if c == ';' && braces == 0 {
            statements.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
            current.clear();
        } else {
            current.push(c);
            // A `static inline` function's body (blz_fork_join_inline) is
            // compiled into its callers: no symbol, no ABI of its own.
            if c == '}' && braces == 0 && current.trim_start().starts_with("static inline ") {
                current.clear();
            }
        }
    }
    assert!(current.trim().is_empty(), "blitz.h: text after the last declaration: {:?}", current.trim());

    for s in statements {
        // Attribute-like macros (BLZ_API and the like) carry no ABI.
        let words: Vec<&str> = s.split(' ').filter(|w| !attributes.iter().any(|a| a == w)).collect();
        let is_function = s.split(' ').next() == Some("BLZ_API");
        let s = words.join(" ");
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("extern ").filter(|_| is_function) {
            // A variable: its attributes carry no layout, `__thread` says where it lives.
            let decl = rest.split("__attribute__").next().unwrap().trim();
            let decl = decl.strip_prefix("__thread ").unwrap_or(decl);
            let (ty, name) = split_named(decl);
            header.variables.push((name, ty));
            continue;
        }
        if is_function {
            header.functions.push(parse_proto(s));
            continue;
        }
        if let Some(rest) = s.strip_prefix("enum ") {
            let open = rest.find('{').expect("blitz.h: enum without body");
            let close = rest.rfind('}').expect("blitz.h: enum without '}'");
            let name = rest[..open].trim().to_string();
            let mut members = Vec::new();
            for m in rest[open + 1..close].split(',') {
                let m = m.trim();
                if m.is_empty() {
                    continue;
                }
                let member = m.split('=').next().unwrap().trim().to_string();
                assert!(is_ident(&member), "blitz.h: enum member {:?}", m);
                header.constants.push(member.clone());
                members.push(member);
            }
            assert!(rest[close + 1..].trim().is_empty(), "blitz.h: enum declares a variable: {:?}", s);
            header.enums.push((name, members));
        } else if let Some(rest) = s.strip_prefix("typedef struct ") {
            if let Some(open) = rest.find('{') {
                let close = rest.rfind('}').expect("blitz.h: struct without '}'");
                let tag = rest[..open].trim();
                let name = rest[close + 1..].trim().to_string();
                assert_eq!(tag, name, "blitz.h: struct tag and typedef name differ");
                let fields = rest[open + 1..close]
                    .split(';')
                    .map(str::trim)
                    .filter(|f| !f.is_empty())
                    .map(|f| {
                        assert!(!f.contains('('), "blitz.h: a field that is not a plain declaration: {:?}", f);
                        assert!(!f.contains(':'), "blitz.h: a bitfield: {:?}", f);
                        // An array: "uintptr_t job[8]" is a field job of type "uintptr_t[8]".
                        if let Some(open) = f.find('[') {
                            let len = f[open + 1..].strip_suffix(']').expect("blitz.h: an array field without ']'");
                            assert!(len.trim().parse::<usize>().is_ok(), "blitz.h: an array length that is not a number: {:?}", f);
                            let (ty, name) = split_named(&f[..open]);
                            return Field { name, ty: format!("{}[{}]", ty, len.trim()) };
                        }
                        let (ty, name) = split_named(f);
                        Field { name, ty }
                    })
                    .collect();
                header.structs.push((name, fields));
            } else {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                assert!(parts.len() == 2 && parts[0] == parts[1], "blitz.h: unexpected struct typedef {:?}", s);
                header.opaque.push(parts[0].to_string());
            }
        } else if let Some(rest) = s.strip_prefix("typedef ") {
            if let Some(star) = rest.find("(*") {
                // typedef ret (*name)(params)
                let ret = canonical_type(&rest[..star]);
                let after = &rest[star + 2..];
                let name_end = after.find(')').expect("blitz.h: bad function pointer typedef");
                let name = after[..name_end].trim().to_string();
                let params = &after[name_end + 1..];
                let open = params.find('(').expect("blitz.h: bad function pointer typedef");
                let close = params.rfind(')').expect("blitz.h: bad function pointer typedef");
                header.callbacks.push(Proto { name, ret, params: parse_params(&params[open + 1..close]) });
            } else {
                let (ty, name) = split_named(rest);
                header.scalars.push((name, ty));
            }
        } else {
            panic!("blitz.h: a declaration the mirror does not know: {:?}", s);
        }
    }
    header
}
