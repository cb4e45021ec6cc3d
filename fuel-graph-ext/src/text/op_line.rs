//! One node line of text IR, read as the op table says.
//!
//! The line is lexed the same way for every op (result, mnemonic, a quoted
//! name where the op has one, operands, `{key=value}` attributes, placement,
//! type); then the op's row in [`crate::op::defs`] builds the [`Op`],
//! asking for its variant, attributes and placement in its own order, and
//! this file turns a missing piece into the message for it. Attributes the
//! op does not take, a placement of the wrong form and a wrong `:K` are
//! checked last. The lists of ops in "unknown op" messages come from the
//! table too.

use super::cursor::{Cur, ParseError, Ref};
use super::excerpt;
use crate::device::Device;
use crate::dtype::{DType, TensorType};
use crate::op::defs::{lookup, FieldError, Fields, FreeAttrs, OpDef, Placement, GROUPS, OPS};
use crate::op::{CostHint, DeviceList, ExternAttr, Op, ReduceOp};

/// A node line as read: its op and type, and where it stands.
pub(super) struct NodeLine {
    pub op: Op,
    pub ty: TensorType,
    /// Every result's type, where the line gives one per result
    /// (`: f32[1], f32[2]`); empty where it gives one for all.
    pub tys: Vec<TensorType>,
    /// Byte offset of the first type.
    pub ty_pos: usize,
    pub number: usize,
    /// Byte offset of the `%` that starts the line.
    pub pos: usize,
    pub declared_results: Option<(usize, usize)>,
}

/// The placement as written.
enum Place {
    None,
    At(Device),
    To(Device),
    ToList(DeviceList),
}

impl Place {
    fn form(&self) -> Option<Placement> {
        match self {
            Place::None => None,
            Place::At(_) => Some(Placement::At),
            Place::To(_) => Some(Placement::To),
            Place::ToList(_) => Some(Placement::ToList),
        }
    }
}

/// An attribute's value as written: a number, a name or a list
/// (`7`, `f16`, `[1, 2, 3]`); a `cost` is read as a float (`2.5e-5`).
enum Written<'a> {
    Int(u64),
    Name(&'a str),
    List(Vec<u64>),
    Float(f64),
}

/// The pieces of one line, handed out to the row's `build`.
struct Line<'a> {
    name: Option<String>,
    variant: Option<&'a str>,
    /// (key, value, byte offset of the key), in line order; `build` takes
    /// the ones it knows, and what is left is unknown to the op.
    attrs: Vec<(&'a str, Written<'a>, usize)>,
    place: Place,
    /// The declared type of the first result.
    ty: TensorType,
}

impl<'a> Line<'a> {
    fn take(&mut self, key: &'static str) -> Result<Written<'a>, FieldError> {
        let k = self
            .attrs
            .iter()
            .position(|(a, _, _)| *a == key)
            .ok_or(FieldError::MissingAttr(key))?;
        Ok(self.attrs.remove(k).1)
    }
}

impl Fields for Line<'_> {
    fn reduce_op(&mut self) -> Result<ReduceOp, FieldError> {
        self.variant
            .ok_or(FieldError::MissingVariant)?
            .parse()
            .map_err(FieldError::BadVariant)
    }
    fn attr(&mut self, key: &'static str) -> Result<u64, FieldError> {
        match self.take(key)? {
            Written::Int(v) => Ok(v),
            Written::Name(n) => Err(FieldError::NotInteger {
                key,
                found: n.to_string(),
            }),
            Written::List(_) => Err(FieldError::WrongForm { key, list: false }),
            Written::Float(v) => Err(FieldError::NotInteger {
                key,
                found: v.to_string(),
            }),
        }
    }
    fn dtype_attr(&mut self, key: &'static str) -> Result<DType, FieldError> {
        let expected = || DType::ALL.map(DType::as_str).join(", ");
        match self.take(key)? {
            Written::Name(n) => n.parse().map_err(|message: String| FieldError::NotDType {
                key,
                found: message,
            }),
            Written::Int(v) => Err(FieldError::NotDType {
                key,
                found: format!(
                    "`{{{key}=...}}` takes a dtype, found `{v}`: expected one of {}",
                    expected()
                ),
            }),
            Written::List(_) | Written::Float(_) => Err(FieldError::NotDType {
                key,
                found: format!(
                    "`{{{key}=...}}` takes a dtype, found a list or a fraction: expected one of {}",
                    expected()
                ),
            }),
        }
    }
    fn list(&mut self, key: &'static str) -> Result<Option<Vec<u64>>, FieldError> {
        if !self.attrs.iter().any(|(a, _, _)| *a == key) {
            return Ok(None);
        }
        match self.take(key)? {
            Written::List(v) => Ok(Some(v)),
            Written::Int(_) | Written::Name(_) | Written::Float(_) => {
                Err(FieldError::WrongForm { key, list: true })
            }
        }
    }
    fn opt_attr(&mut self, key: &'static str) -> Result<Option<u64>, FieldError> {
        if !self.attrs.iter().any(|(a, _, _)| *a == key) {
            return Ok(None);
        }
        self.attr(key).map(Some)
    }
    fn at(&mut self) -> Result<Device, FieldError> {
        match self.place {
            Place::At(d) => Ok(d),
            _ => Err(FieldError::MissingPlacement(Placement::At)),
        }
    }
    fn to(&mut self) -> Result<Device, FieldError> {
        match self.place {
            Place::To(d) => Ok(d),
            _ => Err(FieldError::MissingPlacement(Placement::To)),
        }
    }
    fn to_list(&mut self) -> Result<DeviceList, FieldError> {
        match &self.place {
            Place::ToList(list) => Ok(list.clone()),
            _ => Err(FieldError::MissingPlacement(Placement::ToList)),
        }
    }
    fn name(&mut self) -> String {
        self.name.take().unwrap_or_default()
    }
    fn result_type(&mut self) -> TensorType {
        self.ty.clone()
    }
    fn free_attrs(&mut self) -> Result<FreeAttrs, FieldError> {
        let mut attrs = Vec::new();
        let mut cost = None;
        for (key, v, _) in self.attrs.drain(..) {
            let v = match v {
                Written::Float(secs) => {
                    cost = Some(CostHint::new(secs).map_err(FieldError::BadCost)?);
                    continue;
                }
                Written::Int(i) => ExternAttr::Int(i),
                Written::Name(n) => ExternAttr::Name(n.to_string()),
                Written::List(l) => ExternAttr::List(l),
            };
            attrs.push((key.to_string(), v));
        }
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((attrs, cost))
    }
}

/// How a placement form is written, for "expected ..." messages.
fn written(p: Placement) -> &'static str {
    match p {
        Placement::At => "`@device`",
        Placement::To => "`-> device`",
        Placement::ToList => "`-> [device, ...]`",
        Placement::Operands => "no placement (results live on their operands' devices)",
    }
}

/// `a, b or c`.
fn one_of(items: &[String]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// How the "expected ..." list shows an op: `add`, `all_reduce.<op>`.
fn shown(def: &OpDef) -> String {
    if def.reduce_variant {
        format!("{}.<op>", def.mnemonic)
    } else {
        def.mnemonic.to_string()
    }
}

/// The message for a mnemonic no row matches: every op, with each group
/// of dotted ops shown once; or, inside a group, its members.
fn unknown_op(mnemonic: &str) -> String {
    let group_of = |m: &str| {
        GROUPS.iter().find(|g| {
            m.strip_prefix(g.prefix)
                .is_some_and(|rest| rest.starts_with('.'))
        })
    };
    if let Some(g) = group_of(mnemonic) {
        let members: Vec<String> = OPS
            .iter()
            .filter(|d| group_of(d.mnemonic).is_some_and(|dg| dg.prefix == g.prefix))
            .map(|d| shown(d))
            .collect();
        return format!(
            "unknown {} `{}`: expected {}",
            g.what,
            excerpt::token(mnemonic),
            one_of(&members)
        );
    }
    let mut all: Vec<String> = Vec::new();
    for d in OPS {
        let item = match group_of(d.mnemonic) {
            Some(g) => g.placeholder.to_string(),
            None => shown(d),
        };
        if !all.contains(&item) {
            all.push(item);
        }
    }
    format!(
        "unknown op `{}`: expected {}",
        excerpt::token(mnemonic),
        one_of(&all)
    )
}

/// Reads the `{key=value, ...}` attributes, if the line has any: each key
/// with its value as written and the byte offset of the key.
fn parse_attrs<'a>(c: &mut Cur<'a>) -> Result<Vec<(&'a str, Written<'a>, usize)>, ParseError> {
    let mut attrs: Vec<(&str, Written, usize)> = Vec::new();
    if !c.eat("{") {
        return Ok(attrs);
    }
    loop {
        c.skip_ws();
        let apos = c.pos;
        let key = c.ident("an attribute name")?;
        c.expect("=", "`=` after the attribute name")?;
        c.skip_ws();
        // A list, a number, or a name (a dtype); an op reads its
        // attributes as the kind it takes.
        let v = if key == "cost" {
            Written::Float(parse_seconds(c)?)
        } else if c.eat("[") {
            Written::List(parse_extent_list(c, key)?)
        } else if c.rest().starts_with(|ch: char| ch.is_ascii_alphabetic()) {
            Written::Name(c.ident("an attribute value")?)
        } else {
            Written::Int(c.number("an integer attribute value")?)
        };
        if attrs.iter().any(|(k, _, _)| *k == key) {
            return Err(c.err_at(
                apos,
                format!("attribute `{}` is given twice", excerpt::token(key)),
            ));
        }
        attrs.push((key, v, apos));
        if c.eat("}") {
            break;
        }
        c.expect(",", "`,` or `}` in the attributes")?;
    }
    Ok(attrs)
}

/// Reads a `cost` hint's number of seconds (`2.5e-5`, `0.001`); whether
/// it is finite and not negative is the op's to check.
fn parse_seconds(c: &mut Cur<'_>) -> Result<f64, ParseError> {
    let rest = c.rest();
    let len = rest
        .find(|ch: char| !(ch.is_ascii_alphanumeric() || matches!(ch, '.' | '+' | '-' | '_')))
        .unwrap_or(rest.len());
    let token = rest.get(..len).unwrap_or("");
    let secs = token.parse::<f64>().map_err(|_| {
        c.err(format!(
            "expected the seconds one call takes after `cost=` (like `2.5e-5`), found `{}`",
            excerpt::token(token)
        ))
    })?;
    c.pos += len;
    Ok(secs)
}

/// Reads the rest of a list attribute `[a, b, ...]` after its `[`.
fn parse_extent_list(c: &mut Cur<'_>, key: &str) -> Result<Vec<u64>, ParseError> {
    let mut list = Vec::new();
    if c.eat("]") {
        return Ok(list);
    }
    loop {
        c.skip_ws();
        if c.peek("-") {
            return Err(c.err(format!(
                "`{}` lists extents, which are 0 or more; write a count of entries, not a negative number",
                excerpt::token(key)
            )));
        }
        list.push(c.number(&format!("an extent in `{}`", excerpt::token(key)))?);
        if c.eat("]") {
            break;
        }
        c.expect(",", "`,` or `]` in the list")?;
    }
    Ok(list)
}

/// Reads the placement as written: `@dev`, `-> dev`, `-> [dev, ...]` or none.
fn parse_place(c: &mut Cur<'_>) -> Result<Place, ParseError> {
    if c.eat("@") {
        return Ok(Place::At(c.device()?));
    }
    if !c.eat("->") {
        return Ok(Place::None);
    }
    if !c.eat("[") {
        return Ok(Place::To(c.device()?));
    }
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
    Ok(Place::ToList(list))
}

/// The message for a piece the op's row asked for and did not get.
fn field_error(
    c: &Cur<'_>,
    e: FieldError,
    def: &OpDef,
    mnemonic: &str,
    op_pos: usize,
    place_pos: usize,
) -> ParseError {
    match e {
        FieldError::MissingVariant => c.err_at(
            op_pos,
            format!("expected `{}.sum|prod|max|min|mean`", def.mnemonic),
        ),
        FieldError::BadVariant(message) => c.err_at(op_pos, message),
        FieldError::MissingAttr(key) => c.err_at(
            op_pos,
            format!("expected attribute `{{{key}=...}}` on `{mnemonic}`"),
        ),
        FieldError::TooLarge { key, value, bits } => c.err_at(
            op_pos,
            format!("{{{key}={value}}} does not fit in {bits} bits"),
        ),
        FieldError::NotInteger { key, found } => c.err_at(
            op_pos,
            format!("attribute `{key}` of `{mnemonic}` takes an integer, found `{found}`"),
        ),
        FieldError::NotDType { found, .. } => c.err_at(op_pos, found),
        FieldError::WrongForm { key, list: true } => c.err_at(
            op_pos,
            format!("attribute `{key}` of `{mnemonic}` is a list; write `{{{key}=[a, b, ...]}}`"),
        ),
        FieldError::WrongForm { key, list: false } => c.err_at(
            op_pos,
            format!("attribute `{key}` of `{mnemonic}` is an integer; write `{{{key}=N}}`"),
        ),
        FieldError::BadCost(message) => c.err_at(op_pos, message),
        FieldError::MissingPlacement(Placement::At) => c.err_at(
            place_pos,
            format!("expected `@device` placement on `{mnemonic}`"),
        ),
        FieldError::MissingPlacement(p) => c.err_at(
            place_pos,
            format!("expected {} on `{mnemonic}`", written(p)),
        ),
    }
}

/// The message for the first attribute the op's row did not take, if any.
fn leftover_attr(c: &Cur<'_>, line: &Line<'_>, def: &OpDef, mnemonic: &str) -> Option<ParseError> {
    let (key, _, apos) = line.attrs.first()?;
    let known = if def.attrs.is_empty() && def.opt_attrs.is_empty() && def.lists.is_empty() {
        "none".to_string()
    } else {
        let mut all: Vec<&str> = def.attrs.iter().chain(def.opt_attrs).copied().collect();
        all.sort_unstable();
        all.extend(def.lists.iter().copied());
        all.join(", ")
    };
    Some(c.err_at(
        *apos,
        format!(
            "unknown attribute `{}` for `{mnemonic}`: it takes {known}",
            excerpt::token(key)
        ),
    ))
}

/// Reads a node line; its operands go to the end of `refs`. (`#[inline]`:
/// its one caller is the parser's loop, in another module.)
#[inline]
pub(super) fn parse_node_line(
    c: &mut Cur<'_>,
    refs: &mut Vec<Ref>,
) -> Result<NodeLine, ParseError> {
    let pos = c.pos;
    c.expect("%", "a node line `%N = op ...`, `return` or `}`")?;
    let number = c.number("a value number after `%`")? as usize;
    let declared_results = c
        .suffix(b':', "a result count after `:`")?
        .map(|(k, at)| (k as usize, at));
    c.expect("=", "`=`")?;
    c.skip_ws();
    let op_pos = c.pos;
    let mnemonic = c.ident("an op name")?;
    // `split_once('.')` by bytes: mnemonics are a few ASCII bytes, too
    // short for the memchr-based searcher to pay off.
    let base = match mnemonic.bytes().position(|b| b == b'.') {
        Some(i) => mnemonic.get(..i).unwrap_or(""),
        None => mnemonic,
    };
    let named = OPS.iter().any(|d| d.named && d.mnemonic == base);
    let name = if named { Some(c.string()?) } else { None };
    if c.peek("%") {
        loop {
            refs.push(c.value_ref()?);
            if !c.eat(",") {
                break;
            }
        }
    }
    let attrs = parse_attrs(c)?;
    c.skip_ws();
    let place_pos = c.pos;
    let place = parse_place(c)?;
    c.expect(":", "`:` and the result type")?;
    c.skip_ws();
    let ty_pos = c.pos;
    let ty = c.tensor_type()?;
    let mut tys = Vec::new();
    while c.eat(",") {
        if tys.is_empty() {
            tys.push(ty.clone());
        }
        tys.push(c.tensor_type()?);
    }
    if !c.at_end() {
        let found = c.found();
        return Err(c.err(format!(
            "expected end of line after the type, found {found}"
        )));
    }

    // Build the op as its row says, then check what the row did not take.
    let Some((def, variant)) = lookup(mnemonic) else {
        return Err(c.err_at(op_pos, unknown_op(mnemonic)));
    };
    let given = place.form();
    let mut line = Line {
        name,
        variant,
        attrs,
        place,
        ty: ty.clone(),
    };
    let op =
        (def.build)(&mut line).map_err(|e| field_error(c, e, def, mnemonic, op_pos, place_pos))?;
    if let Some(e) = leftover_attr(c, &line, def, mnemonic) {
        return Err(e);
    }
    let placement_ok = match def.placement {
        Placement::Operands => given.is_none(),
        p => given == Some(p),
    };
    if !placement_ok {
        return Err(c.err_at(
            place_pos,
            format!("expected {} on `{mnemonic}`", written(def.placement)),
        ));
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
        tys,
        ty_pos,
        number,
        pos,
        declared_results,
    })
}
