//! `calculate`: numeric arithmetic on an expression string.
//!
//! A small recursive-descent parser over `f64`, written here rather than borrowed, because the
//! contract is narrow (no variables, no assignment, no code execution) and every error must name
//! its position. Grammar, loosest first:
//!
//! ```text
//! expr   = term (("+" | "-") term)*
//! term   = unary (("*" | "×" | "/" | "÷" | "%") unary)*
//! unary  = ("-" | "+") unary | power
//! power  = atom ("^" unary)?            -- right-associative; -2^2 = -4, 2^-1 = 0.5
//! atom   = number | name | name "(" args ")" | "(" expr ")"
//! ```
//!
//! Names are the constants `pi`, `e`, `tau` and the functions in [`call_function`].

use serde_json::{Value, json};

use crate::error::Error;
use crate::registry::{Handler, ToolSpec, sync_handler};

/// Longest expression accepted, in characters.
const MAX_LEN: usize = 1000;
/// Deepest nesting of parentheses and unary operators.
const MAX_DEPTH: usize = 64;

/// The tool's spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        "calculate",
        "Calculate",
        "Evaluate a numeric arithmetic expression. Operators: + - * / % ^ (also × ÷), \
         parentheses, unary minus. Functions: sqrt, abs, min, max, round, floor, ceil, ln, \
         log10, log2, exp, sin, cos, tan. Constants: pi, e, tau. Returns {expression, value}.",
        json!({
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_LEN,
                    "description": "The expression, e.g. \"(1 + 2) * 3 ^ 2\""
                }
            },
            "required": ["expression"],
            "additionalProperties": false
        }),
    )
    .output(json!({
        "type": "object",
        "properties": {
            "expression": {"type": "string"},
            "value": {"type": "number"}
        },
        "required": ["expression", "value"]
    }))
}

/// The tool's handler.
pub fn handler() -> Handler {
    sync_handler(|args| {
        let expression = args["expression"].as_str().unwrap_or_default();
        let value = evaluate(expression).map_err(|e| Error::tool("calculate", e))?;
        Ok(json!({"expression": expression, "value": number(value)}))
    })
}

/// Integral results print as integers (`9`, not `9.0`) when exactly representable.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

/// Evaluates an expression. Errors name the 1-based character position.
pub fn evaluate(expression: &str) -> std::result::Result<f64, String> {
    let mut p = Parser {
        chars: expression.chars().collect(),
        pos: 0,
        depth: 0,
    };
    if p.chars.len() > MAX_LEN {
        return Err(format!(
            "the expression is longer than {MAX_LEN} characters"
        ));
    }
    p.skip_ws();
    if p.pos == p.chars.len() {
        return Err("the expression is empty".into());
    }
    let v = p.expr()?;
    p.skip_ws();
    if p.pos < p.chars.len() {
        return Err(p.error(&format!("unexpected `{}`", p.chars[p.pos])));
    }
    if v.is_nan() {
        return Err("the result is not a real number".into());
    }
    if v.is_infinite() {
        return Err("the result overflows (it is too large to represent)".into());
    }
    Ok(v)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn error(&self, what: &str) -> String {
        format!("{what} at position {}", self.pos + 1)
    }

    fn skip_ws(&mut self) {
        while self.pos < self.chars.len() && self.chars[self.pos].is_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.chars.get(self.pos).copied()
    }

    fn enter(&mut self) -> std::result::Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(&format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn expr(&mut self) -> std::result::Result<f64, String> {
        let mut v = self.term()?;
        while let Some(c @ ('+' | '-' | '−')) = self.peek() {
            self.pos += 1;
            let r = self.term()?;
            v = if c == '+' { v + r } else { v - r };
            self.check_finite(v)?;
        }
        Ok(v)
    }

    fn term(&mut self) -> std::result::Result<f64, String> {
        let mut v = self.unary()?;
        while let Some(c @ ('*' | '×' | '/' | '÷' | '%')) = self.peek() {
            let at = self.pos;
            self.pos += 1;
            let r = self.unary()?;
            v = match c {
                '*' | '×' => v * r,
                _ if r == 0.0 => {
                    self.pos = at;
                    let what = if c == '%' {
                        "modulo by zero"
                    } else {
                        "division by zero"
                    };
                    return Err(self.error(what));
                }
                '%' => v % r,
                _ => v / r,
            };
            self.check_finite(v)?;
        }
        Ok(v)
    }

    fn unary(&mut self) -> std::result::Result<f64, String> {
        match self.peek() {
            Some('-' | '−') => {
                self.pos += 1;
                self.enter()?;
                let v = -self.unary()?;
                self.depth -= 1;
                Ok(v)
            }
            Some('+') => {
                self.pos += 1;
                self.enter()?;
                let v = self.unary()?;
                self.depth -= 1;
                Ok(v)
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> std::result::Result<f64, String> {
        let base = self.atom()?;
        if self.peek() == Some('^') {
            self.pos += 1;
            self.enter()?;
            let exp = self.unary()?;
            self.depth -= 1;
            let v = base.powf(exp);
            self.check_finite(v)?;
            return Ok(v);
        }
        Ok(base)
    }

    fn check_finite(&self, v: f64) -> std::result::Result<(), String> {
        if v.is_infinite() {
            return Err(self.error("overflow: the result is too large"));
        }
        Ok(())
    }

    fn atom(&mut self) -> std::result::Result<f64, String> {
        match self.peek() {
            None => Err(self.error("the expression ends too early")),
            Some('(') => {
                self.pos += 1;
                self.enter()?;
                let v = self.expr()?;
                self.depth -= 1;
                if self.peek() != Some(')') {
                    return Err(self.error("missing `)`"));
                }
                self.pos += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => self.number(),
            Some(c) if c.is_alphabetic() || c == 'π' => self.name(),
            Some(c) => Err(self.error(&format!("unexpected `{c}`"))),
        }
    }

    fn number(&mut self) -> std::result::Result<f64, String> {
        let start = self.pos;
        let digits = |p: &mut Parser| {
            while p
                .chars
                .get(p.pos)
                .is_some_and(|c| c.is_ascii_digit() || *c == '_')
            {
                p.pos += 1;
            }
        };
        digits(self);
        if self.chars.get(self.pos) == Some(&'.') {
            self.pos += 1;
            digits(self);
        }
        if matches!(self.chars.get(self.pos), Some('e' | 'E'))
            && self
                .chars
                .get(self.pos + 1)
                .is_some_and(|c| c.is_ascii_digit() || *c == '-' || *c == '+')
        {
            self.pos += 2;
            digits(self);
        }
        let text: String = self.chars[start..self.pos]
            .iter()
            .filter(|c| **c != '_')
            .collect();
        text.parse::<f64>().map_err(|_| {
            self.pos = start;
            self.error(&format!("`{text}` is not a number"))
        })
    }

    fn name(&mut self) -> std::result::Result<f64, String> {
        let start = self.pos;
        while self
            .chars
            .get(self.pos)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == 'π')
        {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .to_lowercase();
        if self.peek() == Some('(') {
            self.pos += 1;
            self.enter()?;
            let mut args = Vec::new();
            if self.peek() == Some(')') {
                self.pos += 1;
            } else {
                loop {
                    args.push(self.expr()?);
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some(')') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return Err(self.error("expected `,` or `)` in the argument list")),
                    }
                }
            }
            self.depth -= 1;
            return call_function(&name, &args).map_err(|m| {
                self.pos = start;
                self.error(&m)
            });
        }
        match name.as_str() {
            "pi" | "π" => Ok(std::f64::consts::PI),
            "e" => Ok(std::f64::consts::E),
            "tau" => Ok(std::f64::consts::TAU),
            _ => {
                self.pos = start;
                Err(self.error(&format!("unknown name `{name}`")))
            }
        }
    }
}

/// The functions `calculate` knows, by name.
fn call_function(name: &str, args: &[f64]) -> std::result::Result<f64, String> {
    let one = |f: fn(f64) -> f64| match args {
        [x] => Ok(f(*x)),
        _ => Err(format!("`{name}` takes 1 argument, got {}", args.len())),
    };
    let v = match name {
        "sqrt" => {
            if args.first().is_some_and(|x| *x < 0.0) {
                return Err("`sqrt` of a negative number is not a real number".into());
            }
            one(f64::sqrt)?
        }
        "abs" => one(f64::abs)?,
        "floor" => one(f64::floor)?,
        "ceil" => one(f64::ceil)?,
        "exp" => one(f64::exp)?,
        "sin" => one(f64::sin)?,
        "cos" => one(f64::cos)?,
        "tan" => one(f64::tan)?,
        "ln" | "log10" | "log2" | "log" => {
            if args.first().is_some_and(|x| *x <= 0.0) {
                return Err(format!("`{name}` needs a positive number"));
            }
            match name {
                "ln" | "log" => one(f64::ln)?,
                "log10" => one(f64::log10)?,
                _ => one(f64::log2)?,
            }
        }
        "round" => match args {
            [x] => x.round(),
            [x, digits] if digits.fract() == 0.0 && (0.0..=15.0).contains(digits) => {
                let m = 10f64.powi(*digits as i32);
                (x * m).round() / m
            }
            [_, _] => return Err("`round`'s second argument is a digit count from 0 to 15".into()),
            _ => {
                return Err(format!(
                    "`round` takes 1 or 2 arguments, got {}",
                    args.len()
                ));
            }
        },
        "min" | "max" => {
            if args.is_empty() {
                return Err(format!("`{name}` needs at least 1 argument"));
            }
            let pick = if name == "min" { f64::min } else { f64::max };
            args.iter().copied().fold(args[0], pick)
        }
        _ => {
            return Err(format!(
                "unknown function `{name}`; known: sqrt, abs, min, max, round, floor, ceil, ln, \
                 log10, log2, exp, sin, cos, tan"
            ));
        }
    };
    if v.is_infinite() {
        return Err(format!("overflow in `{name}`"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(e: &str) -> f64 {
        evaluate(e).unwrap_or_else(|m| panic!("{e}: {m}"))
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(ok("1 + 2 * 3"), 7.0);
        assert_eq!(ok("(1 + 2) * 3 ^ 2"), 27.0);
        assert_eq!(ok("2 ^ 3 ^ 2"), 512.0);
        assert_eq!(ok("-2 ^ 2"), -4.0);
        assert_eq!(ok("2 ^ -1"), 0.5);
        assert_eq!(ok("10 - 4 - 3"), 3.0);
        assert_eq!(ok("7 % 4"), 3.0);
        assert_eq!(ok("6 × 7 ÷ 2"), 21.0);
        assert_eq!(ok("--3"), 3.0);
        assert_eq!(ok("1e3 + 1_000"), 2000.0);
    }

    #[test]
    fn functions_and_constants() {
        assert_eq!(ok("sqrt(16) + abs(-2)"), 6.0);
        assert_eq!(ok("max(1, 5, 3) - min(4, 2)"), 3.0);
        assert_eq!(ok("round(2.345, 2)"), 2.35);
        assert_eq!(ok("floor(2.7) + ceil(2.1)"), 5.0);
        assert!((ok("ln(e)") - 1.0).abs() < 1e-12);
        assert_eq!(ok("log10(1000)"), 3.0);
        assert!((ok("2 * pi") - std::f64::consts::TAU).abs() < 1e-12);
    }

    #[test]
    fn errors_name_the_position() {
        assert_eq!(
            evaluate("1 / 0").unwrap_err(),
            "division by zero at position 3"
        );
        assert_eq!(
            evaluate("5 % (2 - 2)").unwrap_err(),
            "modulo by zero at position 3"
        );
        assert_eq!(
            evaluate("1 + * 2").unwrap_err(),
            "unexpected `*` at position 5"
        );
        assert_eq!(evaluate("(1 + 2").unwrap_err(), "missing `)` at position 7");
        assert_eq!(
            evaluate("foo(1)").unwrap_err().split(';').next().unwrap(),
            "unknown function `foo`"
        );
        assert!(evaluate("2 x").unwrap_err().contains("position 3"));
        assert!(evaluate("10 ^ 400").unwrap_err().contains("overflow"));
        assert!(
            evaluate("sqrt(-1)")
                .unwrap_err()
                .contains("not a real number")
        );
        assert!(evaluate("   ").unwrap_err().contains("empty"));
        assert!(evaluate(&"(".repeat(200)).unwrap_err().contains("nesting"));
    }

    #[test]
    fn integral_results_are_integers() {
        assert_eq!(number(9.0), json!(9));
        assert_eq!(number(0.5), json!(0.5));
    }
}
