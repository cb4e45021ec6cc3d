//! Parsing text IR into a [`Graph`].
//!
//! Statements are one per line. The parser works in two steps. First it
//! reads every line, adds each node to the graph without operands and keeps
//! the node's operand references (`%N`, `%N#i`) in one flat list. Then it
//! maps every `%N` to its node and sets the operands, so values may be used
//! before the line that defines them (the verifier, not the parser, rejects
//! cycles and type errors). The map from `N` to node is a table indexed by
//! `N` when the numbers are dense (printed files number `%0, %1, ...`) and a
//! hash map otherwise.
//!
//! Every error carries the 1-based line and column and says what was
//! expected. Positions are kept as byte offsets into their line and turned
//! into columns (characters) only when an error is built.

use crate::device::Device;
use crate::dtype::{DType, TensorType};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{CommOp, DeviceList, ElementwiseOp, Op, ReduceOp};
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

/// A parse failure at a position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// What went wrong, usually "expected X, found Y".
    pub message: String,
    /// The offending source line.
    pub source_line: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}:{}: {}", self.line, self.col, self.message)?;
        writeln!(f, "  | {}", self.source_line)?;
        write!(f, "  | {}^", " ".repeat(self.col.saturating_sub(1)))
    }
}

impl std::error::Error for ParseError {}

/// The 1-based column (in characters) of byte offset `pos` of `text`.
fn col_at(text: &str, pos: usize) -> usize {
    text.get(..pos.min(text.len()))
        .map_or(0, |t| t.chars().count())
        + 1
}

/// An error at byte offset `pos` of line `line` of `src`, found after the
/// lines were read (the line is looked up again only here).
fn err_in(src: &str, line: usize, pos: usize, message: String) -> ParseError {
    let text = src.lines().nth(line.saturating_sub(1)).unwrap_or("");
    ParseError {
        line,
        col: col_at(text, pos),
        message,
        source_line: text.to_string(),
    }
}

/// The most nodes [`parse`] reserves room for before reading.
const MAX_RESERVED_NODES: usize = 1 << 20;

/// How many `\n` bytes `src` holds. Counted in blocks of 255 bytes with a
/// `u8` sum per block, which the compiler turns into wide byte compares.
fn count_newlines(src: &str) -> usize {
    src.as_bytes()
        .chunks(255)
        .map(|block| {
            let n: u8 = block.iter().map(|b| u8::from(*b == b'\n')).sum();
            usize::from(n)
        })
        .sum()
}

/// An operand as written: `%N` or `%N#i`, with its line and the byte offset
/// of its `%`.
struct Ref {
    number: usize,
    result: Option<u32>,
    line: usize,
    pos: usize,
}

/// A node line as read, before its operands are resolved.
struct Decl {
    id: NodeId,
    number: usize,
    line: usize,
    /// Byte offset of the `%` that starts the line.
    pos: usize,
    /// `:K` as written, with the byte offset of `K`.
    declared_results: Option<(usize, usize)>,
    /// Its operands, in the flat list of [`Ref`]s.
    refs: Range<usize>,
    multi: bool,
    /// Its result count, known from its line alone (a collective has one
    /// result per operand), so uses before the line see it too.
    results: usize,
}

/// Where each `%N` is defined: an index into the [`Decl`]s.
enum Numbers {
    /// Indexed by `N`; `u32::MAX` where `N` is not defined.
    Dense(Vec<u32>),
    /// For sparse or very large numbers.
    Sparse(HashMap<usize, usize>),
}

impl Numbers {
    /// Maps every number to its line, or says which line defines one twice.
    fn new(decls: &[Decl]) -> Result<Numbers, (usize, usize)> {
        let max = decls.iter().map(|d| d.number).max().unwrap_or(0);
        let dense = max <= 2 * decls.len() + 64 && decls.len() < u32::MAX as usize;
        if dense {
            let mut table = vec![u32::MAX; max + 1];
            for (k, d) in decls.iter().enumerate() {
                if let Some(slot) = table.get_mut(d.number) {
                    if *slot != u32::MAX {
                        return Err((k, *slot as usize));
                    }
                    *slot = k as u32;
                }
            }
            Ok(Numbers::Dense(table))
        } else {
            let mut map = HashMap::with_capacity(decls.len());
            for (k, d) in decls.iter().enumerate() {
                if let Some(prev) = map.insert(d.number, k) {
                    return Err((k, prev));
                }
            }
            Ok(Numbers::Sparse(map))
        }
    }

    fn get(&self, number: usize) -> Option<usize> {
        match self {
            Numbers::Dense(table) => table
                .get(number)
                .filter(|k| **k != u32::MAX)
                .map(|k| *k as usize),
            Numbers::Sparse(map) => map.get(&number).copied(),
        }
    }
}

/// One line being read.
struct Cur<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Cur<'a> {
    fn col_at(&self, pos: usize) -> usize {
        col_at(self.text, pos)
    }
    fn err_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            col: self.col_at(pos),
            message: message.into(),
            source_line: self.text.to_string(),
        }
    }
    fn err(&self, message: impl Into<String>) -> ParseError {
        self.err_at(self.pos, message)
    }
    fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }
    /// Skips whitespace as `str::trim_start` does, ASCII without decoding.
    #[inline]
    fn skip_ws(&mut self) {
        let r = self.rest();
        let ascii = r
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
            .count();
        self.pos += ascii;
        if r.as_bytes().get(ascii).is_some_and(|b| !b.is_ascii()) {
            let r = self.rest();
            self.pos += r.len() - r.trim_start().len();
        }
    }
    /// True at end of line or at a trailing `//` comment.
    #[inline]
    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.rest().is_empty() || self.rest().starts_with("//")
    }
    fn found(&mut self) -> String {
        self.skip_ws();
        match self.rest().chars().next() {
            None => "end of line".into(),
            Some(_) if self.rest().starts_with("//") => "a comment".into(),
            Some(c) => format!("`{c}`"),
        }
    }
    #[inline]
    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }
    #[inline]
    fn expect(&mut self, tok: &str, what: &str) -> Result<(), ParseError> {
        if self.eat(tok) {
            Ok(())
        } else {
            let found = self.found();
            Err(self.err(format!("expected {what}, found {found}")))
        }
    }
    #[inline]
    fn peek(&mut self, tok: &str) -> bool {
        self.skip_ws();
        self.starts_with(tok)
    }
    /// `rest().starts_with(tok)`, compared inline: tokens are a few bytes,
    /// too short to pay for a call to `memcmp`.
    #[inline]
    fn starts_with(&self, tok: &str) -> bool {
        let rest = self.rest().as_bytes();
        rest.len() >= tok.len() && rest.iter().zip(tok.as_bytes()).all(|(a, b)| a == b)
    }
    /// Takes the longest run of bytes that satisfy `f`. `f` accepts ASCII
    /// bytes only, so the run ends on a character boundary.
    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let r = self.rest();
        let n = r.bytes().take_while(|b| b.is_ascii() && f(*b)).count();
        self.pos += n;
        r.get(..n).unwrap_or("")
    }
    fn number(&mut self, what: &str) -> Result<u64, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let mut value = Some(0u64);
        let mut len = 0;
        for b in self.rest().bytes() {
            if !b.is_ascii_digit() {
                break;
            }
            value = value.and_then(|n| n.checked_mul(10)?.checked_add(u64::from(b - b'0')));
            len += 1;
        }
        if len == 0 {
            let found = self.found();
            return Err(self.err(format!("expected {what}, found {found}")));
        }
        self.pos += len;
        value.ok_or_else(|| {
            let digits = self.text.get(start..self.pos).unwrap_or("");
            self.err_at(start, format!("{what} `{digits}` is too large"))
        })
    }
    fn ident(&mut self, what: &str) -> Result<&'a str, ParseError> {
        self.skip_ws();
        let id = self.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if id.is_empty() {
            let found = self.found();
            return Err(self.err(format!("expected {what}, found {found}")));
        }
        Ok(id)
    }
    fn device(&mut self) -> Result<Device, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let text = self.take_while(|b| b.is_ascii_alphanumeric() || b == b':');
        if let Some(device) = Device::parse_plain(text) {
            return Ok(device);
        }
        text.parse::<Device>().map_err(|e| {
            if text.is_empty() {
                let found = self.found();
                self.err(format!("expected a device such as `cpu:0`, found {found}"))
            } else {
                self.err_at(start, e.to_string())
            }
        })
    }
    fn string(&mut self) -> Result<String, ParseError> {
        self.expect("\"", "a quoted input name")?;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => {
                    let esc_at = self.pos + i;
                    match chars.next() {
                        Some((_, '"')) => out.push('"'),
                        Some((_, '\\')) => out.push('\\'),
                        Some((_, 'n')) => out.push('\n'),
                        Some((_, 't')) => out.push('\t'),
                        Some((j, 'u')) => {
                            let body = &self.rest()[j + 1..];
                            let ch = body
                                .strip_prefix('{')
                                .and_then(|b| b.split_once('}'))
                                .and_then(|(hex, _)| {
                                    u32::from_str_radix(hex, 16).ok().map(|v| (hex.len(), v))
                                })
                                .and_then(|(len, v)| char::from_u32(v).map(|c| (len, c)));
                            let Some((len, ch)) = ch else {
                                return Err(self.err_at(
                                    esc_at,
                                    "expected `\\u{HEX}` with a valid code point",
                                ));
                            };
                            out.push(ch);
                            for _ in 0..len + 2 {
                                chars.next();
                            }
                        }
                        _ => {
                            return Err(self.err_at(
                                esc_at,
                                "expected one of the escapes \\\" \\\\ \\n \\t \\u{HEX}",
                            ))
                        }
                    }
                }
                c => out.push(c),
            }
        }
        self.pos = self.text.len();
        Err(self.err("expected a closing `\"`, found end of line"))
    }
    fn tensor_type(&mut self) -> Result<TensorType, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let name = self.take_while(|b| b.is_ascii_alphanumeric());
        let dtype: DType = name.parse().map_err(|e: String| {
            if name.is_empty() {
                self.err("expected a type such as `f32[1024]`")
            } else {
                self.err_at(start, e)
            }
        })?;
        self.expect("[", "`[` after the dtype")?;
        let mut shape = crate::dtype::Shape::new();
        if !self.eat("]") {
            loop {
                let d = self.number("an extent")?;
                shape.push(usize::try_from(d).map_err(|_| self.err("extent is too large"))?);
                if self.eat("]") {
                    break;
                }
                self.expect(",", "`,` or `]` in the shape")?;
            }
        }
        Ok(TensorType { dtype, shape })
    }
    fn value_ref(&mut self) -> Result<Ref, ParseError> {
        self.skip_ws();
        let pos = self.pos;
        self.expect("%", "a value such as `%3`")?;
        let number = self.number("a value number after `%`")? as usize;
        let result = if self.rest().starts_with('#') {
            self.pos += 1;
            let at = self.pos;
            let ix = self.number("a result index after `#`")?;
            // `as u32` would wrap a huge index around to a valid one.
            Some(u32::try_from(ix).map_err(|_| {
                self.err_at(
                    at,
                    format!("result index `{ix}` is too large (at most {})", u32::MAX),
                )
            })?)
        } else {
            None
        };
        Ok(Ref {
            number,
            result,
            line: self.line,
            pos,
        })
    }
}

/// Parses one graph from text IR.
pub fn parse(src: &str) -> Result<Graph, ParseError> {
    let mut lines = src.lines();
    let mut line_no = 0;
    let blank = |l: &str| {
        let t = l.trim();
        t.is_empty() || t.starts_with("//")
    };
    let header = loop {
        let Some(l) = lines.next() else {
            return Err(ParseError {
                line: line_no.max(1),
                col: 1,
                message: "expected `graph @name {`, found end of input".into(),
                source_line: String::new(),
            });
        };
        line_no += 1;
        if !blank(l) {
            break l;
        }
    };
    let mut c = Cur {
        text: header,
        pos: 0,
        line: line_no,
    };
    c.expect("graph", "`graph @name {`")?;
    c.expect("@", "`@` before the graph name")?;
    let name = c.ident("a graph name")?.to_string();
    c.expect("{", "`{` after the graph name")?;
    if !c.at_end() {
        let found = c.found();
        return Err(c.err(format!("expected end of line after `{{`, found {found}")));
    }

    // Step 1: read the lines; add nodes without operands.
    let mut g = Graph::new(name);
    // Reserving once saves regrowing and copying the node storage while the
    // file is read. There is at most one node per line, and no node line is
    // shorter than 17 bytes (`%0=max@cpu:0:u8[]`); past a million nodes the
    // storage grows as it goes, so odd input cannot make a huge reservation.
    let node_bound = (count_newlines(src) + 1)
        .min(src.len() / 17)
        .min(MAX_RESERVED_NODES);
    g.reserve(node_bound, 0);
    let mut decls: Vec<Decl> = Vec::with_capacity(node_bound);
    let mut refs: Vec<Ref> = Vec::new();
    let mut returns: Option<Range<usize>> = None;
    let mut closed = false;
    let mut last_line = header;
    for text in lines {
        line_no += 1;
        last_line = text;
        let mut c = Cur {
            text,
            pos: 0,
            line: line_no,
        };
        c.skip_ws();
        if c.rest().is_empty() {
            continue;
        }
        if let Some(note) = c.rest().strip_prefix("//") {
            if !closed {
                g.add_note(note.strip_prefix(' ').unwrap_or(note).trim_end());
            }
            continue;
        }
        if closed {
            let found = c.found();
            return Err(c.err(format!(
                "expected nothing after the closing `}}`, found {found}"
            )));
        }
        if c.eat("}") {
            if returns.is_none() {
                return Err(c.err("expected a `return` line before the closing `}`"));
            }
            if !c.at_end() {
                let found = c.found();
                return Err(c.err(format!("expected end of line after `}}`, found {found}")));
            }
            closed = true;
            continue;
        }
        if returns.is_some() {
            return Err(c.err("expected `}` after the `return` line"));
        }
        let first = refs.len();
        if c.rest().starts_with("return") {
            c.pos += "return".len();
            if !c.at_end() {
                loop {
                    refs.push(c.value_ref()?);
                    if c.at_end() {
                        break;
                    }
                    c.expect(",", "`,` between returned values")?;
                }
            }
            returns = Some(first..refs.len());
            continue;
        }
        let node = parse_node_line(&mut c, &mut refs)?;
        let operands = refs.len() - first;
        decls.push(Decl {
            number: node.number,
            line: line_no,
            pos: node.pos,
            declared_results: node.declared_results,
            refs: first..refs.len(),
            multi: node.op.is_multi_result(),
            results: node.op.num_results(operands),
            id: g.add_node(node.op, &[], node.ty),
        });
    }
    if !closed {
        return Err(ParseError {
            line: line_no.max(1),
            col: 1,
            message: "expected a closing `}`, found end of input".into(),
            source_line: last_line.to_string(),
        });
    }

    // Step 2: map numbers to nodes, then resolve operands in line order.
    let numbers = Numbers::new(&decls).map_err(|(k, prev)| {
        let (d, p) = (&decls[k], &decls[prev]);
        err_in(
            src,
            d.line,
            d.pos,
            format!("value %{} is already defined on line {}", d.number, p.line),
        )
    })?;
    g.reserve(0, refs.len());
    // `numbers` holds indices of `decls`, so `decls[k]` is in bounds.
    let resolve = |r: &Ref| -> Result<ValueId, ParseError> {
        let err = |message: String| err_in(src, r.line, r.pos, message);
        let k = numbers
            .get(r.number)
            .ok_or_else(|| err(format!("value %{} is not defined", r.number)))?;
        let d = &decls[k];
        let results = d.results;
        match (d.multi, r.result) {
            (true, None) => Err(err(format!(
                "%{} has {results} results: expected `%{}#i`",
                r.number, r.number
            ))),
            (false, Some(_)) => Err(err(format!(
                "%{} has one result: expected `%{}` without `#`",
                r.number, r.number
            ))),
            (true, Some(ix)) if ix as usize >= results => Err(err(format!(
                "%{} has {results} results, so `#{ix}` is out of range",
                r.number
            ))),
            (_, ix) => Ok(ValueId {
                node: d.id,
                result: ix.unwrap_or(0),
            }),
        }
    };
    let mut operands: Vec<ValueId> = Vec::new();
    for d in &decls {
        operands.clear();
        for r in refs.get(d.refs.clone()).unwrap_or_default() {
            operands.push(resolve(r)?);
        }
        g.set_operands(d.id, &operands);
        if let Some((declared, pos)) = d.declared_results {
            if declared != d.results {
                let mnemonic = g.node(d.id).map(|n| n.op.mnemonic()).unwrap_or_default();
                return Err(err_in(
                    src,
                    d.line,
                    pos,
                    format!(
                        "expected `:{}` results for this `{mnemonic}`, found `:{declared}`",
                        d.results
                    ),
                ));
            }
        }
    }
    let outs = refs
        .get(returns.unwrap_or_default())
        .unwrap_or_default()
        .iter()
        .map(resolve)
        .collect::<Result<Vec<_>, _>>()?;
    g.set_outputs(outs);
    Ok(g)
}

/// A node line as read: its op and type, and where it stands.
struct NodeLine {
    op: Op,
    ty: TensorType,
    number: usize,
    /// Byte offset of the `%` that starts the line.
    pos: usize,
    declared_results: Option<(usize, usize)>,
}

/// Reads a node line; its operands go to the end of `refs`.
fn parse_node_line(c: &mut Cur<'_>, refs: &mut Vec<Ref>) -> Result<NodeLine, ParseError> {
    let pos = c.pos;
    c.expect("%", "a node line `%N = op ...`, `return` or `}`")?;
    let number = c.number("a value number after `%`")? as usize;
    let declared_results = if c.rest().starts_with(':') {
        c.pos += 1;
        let kpos = c.pos;
        Some((c.number("a result count after `:`")? as usize, kpos))
    } else {
        None
    };
    c.expect("=", "`=`")?;
    c.skip_ws();
    let op_pos = c.pos;
    let mnemonic = c.ident("an op name")?;
    // `split_once('.')` by bytes: mnemonics are a few ASCII bytes, too
    // short for the memchr-based searcher to pay off.
    let (base, variant) = match mnemonic.bytes().position(|b| b == b'.') {
        Some(i) => (mnemonic.get(..i).unwrap_or(""), mnemonic.get(i + 1..)),
        None => (mnemonic, None),
    };
    let input_name = if base == "input" {
        Some(c.string()?)
    } else {
        None
    };
    if c.peek("%") {
        loop {
            refs.push(c.value_ref()?);
            if !c.eat(",") {
                break;
            }
        }
    }
    let mut attrs: Vec<(&str, u64, usize)> = Vec::new();
    if c.eat("{") {
        loop {
            c.skip_ws();
            let apos = c.pos;
            let key = c.ident("an attribute name")?;
            c.expect("=", "`=` after the attribute name")?;
            let v = c.number("an integer attribute value")?;
            if attrs.iter().any(|(k, _, _)| *k == key) {
                return Err(c.err_at(apos, format!("attribute `{key}` is given twice")));
            }
            attrs.push((key, v, apos));
            if c.eat("}") {
                break;
            }
            c.expect(",", "`,` or `}` in the attributes")?;
        }
    }
    let mut at: Option<Device> = None;
    let mut arrow: Option<Device> = None;
    let mut arrow_list: Option<DeviceList> = None;
    let place_pos = {
        c.skip_ws();
        c.pos
    };
    if c.eat("@") {
        at = Some(c.device()?);
    } else if c.eat("->") {
        if c.eat("[") {
            let mut list = DeviceList::new();
            if !c.eat("]") {
                loop {
                    list.push(c.device()?);
                    if c.eat("]") {
                        break;
                    }
                    c.expect(",", "`,` or `]` in the device list")?;
                }
            }
            arrow_list = Some(list);
        } else {
            arrow = Some(c.device()?);
        }
    }
    c.expect(":", "`:` and the result type")?;
    let ty = c.tensor_type()?;
    if !c.at_end() {
        let found = c.found();
        return Err(c.err(format!(
            "expected end of line after the type, found {found}"
        )));
    }

    // Turn the pieces into an Op, checking each is what this op takes.
    let mut take = |key: &str| -> Option<u64> {
        let k = attrs.iter().position(|(a, _, _)| *a == key)?;
        Some(attrs.remove(k).1)
    };
    let required =
        |key: &str, take: &mut dyn FnMut(&str) -> Option<u64>| -> Result<usize, ParseError> {
            take(key).map(|v| v as usize).ok_or_else(|| {
                c.err_at(
                    op_pos,
                    format!("expected attribute `{{{key}=...}}` on `{mnemonic}`"),
                )
            })
        };
    let need_at = |c: &Cur<'_>| -> Result<Device, ParseError> {
        at.ok_or_else(|| {
            c.err_at(
                place_pos,
                format!("expected `@device` placement on `{mnemonic}`"),
            )
        })
    };
    let reduce_variant = |c: &Cur<'_>| -> Result<ReduceOp, ParseError> {
        let v = variant
            .ok_or_else(|| c.err_at(op_pos, format!("expected `{base}.sum|prod|max|min|mean`")))?;
        v.parse::<ReduceOp>().map_err(|e| c.err_at(op_pos, e))
    };
    let op = match (base, variant) {
        ("input", None) => Op::Input { name: input_name.unwrap_or_default(), device: need_at(c)? },
        ("copy", None) | ("move", None) => {
            let to = arrow.ok_or_else(|| c.err_at(place_pos, format!("expected `-> device` on `{base}`")))?;
            if base == "copy" {
                Op::Copy { to }
            } else {
                Op::Move { to }
            }
        }
        ("add" | "mul" | "max" | "min", None) => {
            let kind = match base {
                "add" => ElementwiseOp::Add,
                "mul" => ElementwiseOp::Mul,
                "max" => ElementwiseOp::Max,
                _ => ElementwiseOp::Min,
            };
            Op::Elementwise { kind, device: need_at(c)? }
        }
        ("div", None) => Op::Div { by: required("by", &mut take)? as u64, device: need_at(c)? },
        ("slice", None) => Op::Slice {
            axis: required("axis", &mut take)?,
            start: required("start", &mut take)?,
            len: required("len", &mut take)?,
            device: need_at(c)?,
        },
        ("concat", None) => Op::Concat { axis: required("axis", &mut take)?, device: need_at(c)? },
        ("all_reduce", _) => Op::AllReduce { op: reduce_variant(c)? },
        ("comm", Some(v)) => {
            let (what, red) = match v.split_once('.') {
                Some((w, r)) => (w, Some(r)),
                None => (v, None),
            };
            let red_op = |c: &Cur<'_>| -> Result<ReduceOp, ParseError> {
                red.ok_or_else(|| c.err_at(op_pos, format!("expected `comm.{what}.sum|prod|max|min|mean`")))?
                    .parse::<ReduceOp>()
                    .map_err(|e| c.err_at(op_pos, e))
            };
            let kind = match (what, red) {
                ("all_reduce", _) => CommOp::AllReduce(red_op(c)?),
                ("reduce_scatter", _) => CommOp::ReduceScatter {
                    op: red_op(c)?,
                    axis: required("axis", &mut take)?,
                },
                ("broadcast", None) => CommOp::Broadcast {
                    root: required("root", &mut take)?,
                },
                ("all_gather", None) => CommOp::AllGather {
                    axis: required("axis", &mut take)?,
                },
                ("barrier", None) => CommOp::Barrier,
                _ => {
                    return Err(c.err_at(
                        op_pos,
                        format!(
                            "unknown SPMD collective `{mnemonic}`: expected comm.all_reduce.<op>, comm.broadcast, comm.all_gather, comm.reduce_scatter.<op> or comm.barrier"
                        ),
                    ))
                }
            };
            let comm = required("comm", &mut take)?;
            let comm = u32::try_from(comm)
                .map_err(|_| c.err_at(op_pos, format!("{{comm={comm}}} does not fit in 32 bits")))?;
            Op::Comm {
                kind,
                comm,
                ranks: required("ranks", &mut take)?,
                device: need_at(c)?,
            }
        }
        ("driver_all_reduce", _) => Op::DriverAllReduce {
            op: reduce_variant(c)?,
            rank: required("rank", &mut take)?,
            device: need_at(c)?,
        },
        ("reduce", _) => Op::Reduce { op: reduce_variant(c)?, root: required("root", &mut take)? },
        ("broadcast", None) => Op::Broadcast {
            to: arrow_list
                .clone()
                .ok_or_else(|| c.err_at(place_pos, "expected `-> [device, ...]` on `broadcast`"))?,
        },
        ("all_gather", None) => Op::AllGather { axis: required("axis", &mut take)? },
        ("reduce_scatter", _) => Op::ReduceScatter { op: reduce_variant(c)?, axis: required("axis", &mut take)? },
        _ => {
            return Err(c.err_at(
                op_pos,
                format!(
                    "unknown op `{mnemonic}`: expected input, copy, move, add, mul, max, min, div, slice, concat, \
                     all_reduce.<op>, reduce.<op>, broadcast, all_gather, reduce_scatter.<op>, driver_all_reduce.<op> or comm.<collective>"
                ),
            ))
        }
    };
    if let Some((key, _, apos)) = attrs.first() {
        let known: Vec<&str> = op.attrs().iter().map(|(k, _)| *k).collect();
        let known = if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        };
        return Err(c.err_at(
            *apos,
            format!("unknown attribute `{key}` for `{mnemonic}`: it takes {known}"),
        ));
    }
    let placement_ok = match &op {
        Op::Copy { .. } | Op::Move { .. } => at.is_none() && arrow_list.is_none(),
        Op::Broadcast { .. } => at.is_none() && arrow.is_none(),
        op if op.is_collective() => at.is_none() && arrow.is_none() && arrow_list.is_none(),
        _ => arrow.is_none() && arrow_list.is_none(),
    };
    if !placement_ok {
        let want = match &op {
            Op::Copy { .. } | Op::Move { .. } => "`-> device`",
            Op::Broadcast { .. } => "`-> [device, ...]`",
            op if op.is_collective() => "no placement (results live on their operands' devices)",
            _ => "`@device`",
        };
        return Err(c.err_at(place_pos, format!("expected {want} on `{mnemonic}`")));
    }
    if declared_results.is_some() != op.is_multi_result() {
        let msg = if op.is_multi_result() {
            format!("expected `%{number}:K` on `{mnemonic}`, which has one result per rank")
        } else {
            format!("expected `%{number}` without `:K` on `{mnemonic}`, which has one result")
        };
        return Err(c.err_at(pos, msg));
    }
    Ok(NodeLine {
        op,
        ty,
        number,
        pos,
        declared_results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::print;

    const SRC: &str = "// leading comment\ngraph @g {\n  // a note\n  %0 = input \"a\\\"b\" @cpu:0 : f32[4]\n  %1 = input \"c\" @cuda:0 : f32[4]\n  %2:2 = all_reduce.sum %0, %1 : f32[4]\n  %3 = slice %2#1 {axis=0, len=2, start=1} @cuda:0 : f32[2]\n  return %2#0, %3 // trailing\n}\n";

    #[test]
    fn parses_and_round_trips() {
        let g = parse(SRC).unwrap();
        let text = print(&g);
        assert!(
            text.contains("%3 = slice %2#1 {axis=0, len=2, start=1} @cuda:0 : f32[2]"),
            "{text}"
        );
        assert!(text.contains("  // a note\n"));
        assert_eq!(print(&parse(&text).unwrap()), text);
    }

    #[test]
    fn errors_have_positions() {
        let cases = [
            ("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = frob %0 @cpu:0 : f32[4]\n  return %1\n}\n", "3:8: unknown op `frob`"),
            ("graph @g {\n  %0 = input \"a\" @gpu:0 : f32[4]\n  return %0\n}\n", "2:19: invalid device `gpu:0`"),
            ("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4\n  return %0\n}\n", "2:32: expected `,` or `]`"),
            ("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  return %7\n}\n", "3:10: value %7 is not defined"),
            ("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  return %0\n", "expected a closing `}`"),
            ("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = slice %0 {axis=0} @cpu:0 : f32[4]\n  return %1\n}\n", "expected attribute `{start=...}`"),
            ("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1:2 = all_reduce.sum %0 : f32[4]\n  return %1#0\n}\n", "expected `:1` results"),
            ("graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1:1 = all_reduce.sum %0 : f32[4]\n  return %1\n}\n", "expected `%1#i`"),
        ];
        for (src, want) in cases {
            let e = parse(src).unwrap_err().to_string();
            assert!(e.contains(want), "want {want:?} in:\n{e}");
        }
    }

    /// Values may be used before their line (docs/text-ir.md), results of
    /// collectives included: the result count comes from the defining line.
    #[test]
    fn multi_result_values_may_be_used_before_their_line() {
        let src = "graph @g {\n  %0 = input \"a\" @cpu:0 : f32[4]\n  %1 = input \"b\" @cpu:1 : f32[4]\n  %3 = add %2#1, %2#1 @cpu:1 : f32[4]\n  %2:2 = all_reduce.sum %0, %1 : f32[4]\n  return %2#0, %3\n}\n";
        let g = parse(src).unwrap();
        let text = print(&g);
        // Printing puts the all_reduce first (topological order).
        assert!(
            text.contains("%2:2 = all_reduce.sum %0, %1 : f32[4]\n  %3 = add %2#1, %2#1"),
            "{text}"
        );
        assert_eq!(print(&parse(&text).unwrap()), text);
        // An index past the defining line's results is still out of range.
        let bad = src.replace("%2#1, %2#1", "%2#2, %2#1");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(
            e.contains("%2 has 2 results, so `#2` is out of range"),
            "{e}"
        );
    }
}
