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

use super::cursor::{col_at, Cur, ParseError, Ref};
use super::op_line::parse_node_line;
use crate::graph::{Graph, NodeId, ValueId};
use std::collections::HashMap;
use std::ops::Range;

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

/// Whether a line holds nothing to read (blank, or a comment).
fn blank(l: &str) -> bool {
    let t = l.trim();
    t.is_empty() || t.starts_with("//")
}

/// Reads up to and including the `graph @name {` line: the graph's name,
/// the header line and its 1-based number.
fn parse_header<'a>(
    lines: &mut std::str::Lines<'a>,
) -> Result<(String, &'a str, usize), ParseError> {
    let mut line_no = 0;
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
    Ok((name, header, line_no))
}

/// What step 1 read: the graph's nodes without operands, each node line,
/// every operand reference in one flat list, and the `return` line's.
struct Read {
    g: Graph,
    decls: Vec<Decl>,
    refs: Vec<Ref>,
    returns: Option<Range<usize>>,
}

/// What one body line was.
enum Body {
    /// Blank, a comment or a note.
    Skip,
    /// The closing `}`.
    Close,
    /// The `return` line.
    Return,
    /// A node line.
    Node,
}

/// Reads one body line into `read`, and says what it was.
fn body_line(c: &mut Cur<'_>, read: &mut Read, closed: bool) -> Result<Body, ParseError> {
    c.skip_ws();
    if c.rest().is_empty() {
        return Ok(Body::Skip);
    }
    if let Some(note) = c.rest().strip_prefix("//") {
        if !closed {
            read.g
                .add_note(note.strip_prefix(' ').unwrap_or(note).trim_end());
        }
        return Ok(Body::Skip);
    }
    if closed {
        let found = c.found();
        return Err(c.err(format!(
            "expected nothing after the closing `}}`, found {found}"
        )));
    }
    if c.eat("}") {
        if read.returns.is_none() {
            return Err(c.err("expected a `return` line before the closing `}`"));
        }
        if !c.at_end() {
            let found = c.found();
            return Err(c.err(format!("expected end of line after `}}`, found {found}")));
        }
        return Ok(Body::Close);
    }
    if read.returns.is_some() {
        return Err(c.err("expected `}` after the `return` line"));
    }
    let first = read.refs.len();
    if c.rest().starts_with("return") {
        c.pos += "return".len();
        if !c.at_end() {
            loop {
                read.refs.push(c.value_ref()?);
                if c.at_end() {
                    break;
                }
                c.expect(",", "`,` between returned values")?;
            }
        }
        read.returns = Some(first..read.refs.len());
        return Ok(Body::Return);
    }
    node_line(c, read, first)?;
    Ok(Body::Node)
}

/// Reads a node line, whose operand references start at `first`, and adds
/// its node without operands.
fn node_line(c: &mut Cur<'_>, read: &mut Read, first: usize) -> Result<(), ParseError> {
    let node = parse_node_line(c, &mut read.refs)?;
    let operands = read.refs.len() - first;
    let results = node.op.num_results(operands);
    if !node.tys.is_empty() && node.tys.len() != results {
        return Err(c.err_at(
            node.ty_pos,
            format!(
                "expected one type, or one per result ({results}), on `{}`; found {}",
                node.op.mnemonic(),
                node.tys.len()
            ),
        ));
    }
    let multi = node.op.is_multi_result();
    let id = read.g.add_node(node.op, &[], node.ty);
    if !node.tys.is_empty() {
        read.g.set_result_types(id, node.tys);
    }
    read.decls.push(Decl {
        number: node.number,
        line: c.line,
        pos: node.pos,
        declared_results: node.declared_results,
        refs: first..read.refs.len(),
        multi,
        results,
        id,
    });
    Ok(())
}

/// Step 1: reads the lines after the header; adds nodes without operands.
fn read_body<'a>(
    src: &str,
    lines: std::str::Lines<'a>,
    (name, header, mut line_no): (String, &'a str, usize),
) -> Result<Read, ParseError> {
    let mut read = Read {
        g: Graph::new(name),
        decls: Vec::new(),
        refs: Vec::new(),
        returns: None,
    };
    // Reserving once saves regrowing and copying the node storage while the
    // file is read. There is at most one node per line, and no node line is
    // shorter than 17 bytes (`%0=max@cpu:0:u8[]`); past a million nodes the
    // storage grows as it goes, so odd input cannot make a huge reservation.
    let node_bound = (count_newlines(src) + 1)
        .min(src.len() / 17)
        .min(MAX_RESERVED_NODES);
    read.g.reserve(node_bound, 0);
    read.decls.reserve(node_bound);
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
        if let Body::Close = body_line(&mut c, &mut read, closed)? {
            closed = true;
        }
    }
    if !closed {
        return Err(ParseError {
            line: line_no.max(1),
            col: 1,
            message: "expected a closing `}`, found end of input".into(),
            source_line: last_line.to_string(),
        });
    }
    Ok(read)
}

/// Step 2: maps numbers to nodes, then resolves operands in line order.
fn resolve_operands(src: &str, read: Read) -> Result<Graph, ParseError> {
    let Read {
        mut g,
        decls,
        refs,
        returns,
    } = read;
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

/// Parses one graph from text IR.
pub fn parse(src: &str) -> Result<Graph, ParseError> {
    let mut lines = src.lines();
    let header = parse_header(&mut lines)?;
    let read = read_body(src, lines, header)?;
    resolve_operands(src, read)
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
