//! Parsing text IR into a [`Graph`].
//!
//! Statements are one per line. The parser works in two steps: it reads every
//! line into a pending node, then creates all nodes and resolves operands, so
//! values may be used before the line that defines them (the verifier, not
//! the parser, rejects cycles and type errors). Every error carries the
//! 1-based line and column and says what was expected.

use crate::device::Device;
use crate::dtype::{DType, TensorType};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{CommOp, DeviceList, ElementwiseOp, Op, ReduceOp};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use std::fmt;

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

/// An operand as written: `%N` or `%N#i`, with its position.
struct Ref {
    number: usize,
    result: Option<u32>,
    line: usize,
    col: usize,
}

struct Pending {
    op: Op,
    operands: Vec<Ref>,
    ty: TensorType,
    declared_results: Option<(usize, usize)>, // (K, column)
    number: usize,
    line: usize,
    col: usize,
}

/// One line being read.
struct Cur<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Cur<'a> {
    fn col_at(&self, pos: usize) -> usize {
        self.text[..pos.min(self.text.len())].chars().count() + 1
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
        &self.text[self.pos..]
    }
    fn skip_ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }
    /// True at end of line or at a trailing `//` comment.
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
    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, tok: &str, what: &str) -> Result<(), ParseError> {
        if self.eat(tok) {
            Ok(())
        } else {
            let found = self.found();
            Err(self.err(format!("expected {what}, found {found}")))
        }
    }
    fn peek(&mut self, tok: &str) -> bool {
        self.skip_ws();
        self.rest().starts_with(tok)
    }
    fn take_while(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let r = self.rest();
        let n = r
            .char_indices()
            .find(|(_, c)| !f(*c))
            .map_or(r.len(), |(i, _)| i);
        self.pos += n;
        &r[..n]
    }
    fn number(&mut self, what: &str) -> Result<u64, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let digits = self.take_while(|c| c.is_ascii_digit());
        if digits.is_empty() {
            let found = self.found();
            return Err(self.err(format!("expected {what}, found {found}")));
        }
        digits
            .parse()
            .map_err(|_| self.err_at(start, format!("{what} `{digits}` is too large")))
    }
    fn ident(&mut self, what: &str) -> Result<&'a str, ParseError> {
        self.skip_ws();
        let id = self.take_while(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-');
        if id.is_empty() {
            let found = self.found();
            return Err(self.err(format!("expected {what}, found {found}")));
        }
        Ok(id)
    }
    fn device(&mut self) -> Result<Device, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let text = self.take_while(|c| c.is_ascii_alphanumeric() || c == ':');
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
        let name = self.take_while(|c| c.is_ascii_alphanumeric());
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
        let col = self.col_at(self.pos);
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
            col,
        })
    }
}

/// Parses one graph from text IR.
pub fn parse(src: &str) -> Result<Graph, ParseError> {
    let lines: Vec<&str> = src.lines().collect();
    let mut i = 0;
    let blank = |l: &str| {
        let t = l.trim();
        t.is_empty() || t.starts_with("//")
    };
    while i < lines.len() && blank(lines[i]) {
        i += 1;
    }
    let Some(header) = lines.get(i) else {
        return Err(ParseError {
            line: lines.len().max(1),
            col: 1,
            message: "expected `graph @name {`, found end of input".into(),
            source_line: String::new(),
        });
    };
    let mut c = Cur {
        text: header,
        pos: 0,
        line: i + 1,
    };
    c.expect("graph", "`graph @name {`")?;
    c.expect("@", "`@` before the graph name")?;
    let name = c.ident("a graph name")?.to_string();
    c.expect("{", "`{` after the graph name")?;
    if !c.at_end() {
        let found = c.found();
        return Err(c.err(format!("expected end of line after `{{`, found {found}")));
    }
    let mut g = Graph::new(name);
    let mut pending: Vec<Pending> = Vec::new();
    let mut returns: Option<Vec<Ref>> = None;
    let mut closed = false;
    i += 1;
    while i < lines.len() {
        let text = lines[i];
        let mut c = Cur {
            text,
            pos: 0,
            line: i + 1,
        };
        i += 1;
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
        if c.rest().starts_with("return") {
            c.pos += "return".len();
            let mut refs = Vec::new();
            if !c.at_end() {
                loop {
                    refs.push(c.value_ref()?);
                    if c.at_end() {
                        break;
                    }
                    c.expect(",", "`,` between returned values")?;
                }
            }
            returns = Some(refs);
            continue;
        }
        pending.push(parse_node_line(&mut c)?);
    }
    if !closed {
        return Err(ParseError {
            line: lines.len().max(1),
            col: 1,
            message: "expected a closing `}`, found end of input".into(),
            source_line: lines.last().copied().unwrap_or("").to_string(),
        });
    }
    let source_line = |line: usize| lines.get(line - 1).copied().unwrap_or("").to_string();

    // Step 2: create the nodes, then resolve operands.
    let mut by_number: HashMap<usize, usize> = HashMap::new();
    for (k, p) in pending.iter().enumerate() {
        if let Some(prev) = by_number.insert(p.number, k) {
            return Err(ParseError {
                line: p.line,
                col: p.col,
                message: format!(
                    "value %{} is already defined on line {}",
                    p.number, pending[prev].line
                ),
                source_line: source_line(p.line),
            });
        }
    }
    let ids: Vec<NodeId> = pending
        .iter()
        .map(|p| g.add_node(p.op.clone(), &[], p.ty.clone()))
        .collect();
    debug_assert!(ids
        .iter()
        .enumerate()
        .all(|(k, id)| id.0 == NodeIndex::new(k)));
    // `by_number` maps to indices of `pending`, and `ids` has one entry per
    // pending node, so `ids[k]` and `pending[prev]` are in bounds.
    let resolve = |r: &Ref, g: &Graph| -> Result<ValueId, ParseError> {
        let err = |message: String| ParseError {
            line: r.line,
            col: r.col,
            message,
            source_line: source_line(r.line),
        };
        let k = *by_number
            .get(&r.number)
            .ok_or_else(|| err(format!("value %{} is not defined", r.number)))?;
        let node = g
            .node(ids[k])
            .ok_or_else(|| err("internal: node vanished".into()))?;
        let multi = node.op.is_multi_result();
        match (multi, r.result) {
            (true, None) => Err(err(format!(
                "%{} has {} results: expected `%{}#i`",
                r.number,
                node.num_results(),
                r.number
            ))),
            (false, Some(_)) => Err(err(format!(
                "%{} has one result: expected `%{}` without `#`",
                r.number, r.number
            ))),
            (true, Some(ix)) if ix as usize >= node.num_results() => Err(err(format!(
                "%{} has {} results, so `#{ix}` is out of range",
                r.number,
                node.num_results()
            ))),
            (_, ix) => Ok(ValueId {
                node: ids[k],
                result: ix.unwrap_or(0),
            }),
        }
    };
    for (k, p) in pending.iter().enumerate() {
        let ops = p
            .operands
            .iter()
            .map(|r| resolve(r, &g))
            .collect::<Result<Vec<_>, _>>()?;
        g.set_operands(ids[k], &ops);
        if let Some((declared, col)) = p.declared_results {
            let actual = g.node(ids[k]).map_or(0, |n| n.num_results());
            if declared != actual {
                return Err(ParseError {
                    line: p.line,
                    col,
                    message: format!(
                        "expected `:{actual}` results for this `{}`, found `:{declared}`",
                        p.op.mnemonic()
                    ),
                    source_line: source_line(p.line),
                });
            }
        }
    }
    let outs = returns
        .unwrap_or_default()
        .iter()
        .map(|r| resolve(r, &g))
        .collect::<Result<Vec<_>, _>>()?;
    g.set_outputs(outs);
    Ok(g)
}

fn parse_node_line(c: &mut Cur<'_>) -> Result<Pending, ParseError> {
    let line = c.line;
    let col = c.col_at(c.pos);
    c.expect("%", "a node line `%N = op ...`, `return` or `}`")?;
    let number = c.number("a value number after `%`")? as usize;
    let declared_results = if c.rest().starts_with(':') {
        c.pos += 1;
        let kcol = c.col_at(c.pos);
        Some((c.number("a result count after `:`")? as usize, kcol))
    } else {
        None
    };
    c.expect("=", "`=`")?;
    c.skip_ws();
    let op_pos = c.pos;
    let mnemonic = c.ident("an op name")?;
    let (base, variant) = match mnemonic.split_once('.') {
        Some((b, v)) => (b, Some(v)),
        None => (mnemonic, None),
    };
    let input_name = if base == "input" {
        Some(c.string()?)
    } else {
        None
    };
    let mut operands = Vec::new();
    if c.peek("%") {
        loop {
            operands.push(c.value_ref()?);
            if !c.eat(",") {
                break;
            }
        }
    }
    let mut attrs: Vec<(String, u64, usize)> = Vec::new();
    if c.eat("{") {
        loop {
            c.skip_ws();
            let apos = c.pos;
            let key = c.ident("an attribute name")?.to_string();
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
        let k = attrs.iter().position(|(a, _, _)| a == key)?;
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
        return Err(ParseError {
            line,
            col,
            message: msg,
            source_line: c.text.to_string(),
        });
    }
    Ok(Pending {
        op,
        operands,
        ty,
        declared_results,
        number,
        line,
        col,
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
}
