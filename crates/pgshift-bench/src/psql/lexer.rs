//! Splits a psql script into complete statements and meta-commands, the way
//! psql's own lexer does for the constructs the relay scripts use: quoted
//! strings (`'…'`, `E'…'`, `"…"`), dollar quotes (`$tag$…$tag$`), `--` and
//! nested `/* */` comments, casts (`::`), and `:name` variable interpolation
//! outside quotes. A backslash outside quotes starts a meta-command that runs
//! to the end of the line; the query buffer is kept across it (so `\gexec` can
//! take it).

use std::collections::BTreeMap;

/// psql variables (`\set`, `-v name=value`).
pub(crate) type Variables = BTreeMap<String, String>;

/// One unit of a script.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Item {
    /// A complete statement, up to and including its `;`.
    Statement {
        /// The line where its text starts.
        line: usize,
        /// The statement, variables interpolated.
        sql: String,
    },
    /// A meta-command; the query buffer is left as it was.
    Meta {
        /// Its line.
        line: usize,
        /// The command name, without the backslash (e.g. `gexec`).
        command: String,
        /// Its arguments, variables interpolated.
        args: Vec<String>,
    },
}

/// Why a script cannot be lexed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LexError {
    /// The line where the problem starts.
    pub line: usize,
    /// What is wrong.
    pub detail: String,
}

/// The lexer: call [`Lexer::next_item`] until it returns `None`, then
/// [`Lexer::take_buffer`] for an unterminated last statement.
pub(crate) struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    buffer: String,
    buffer_line: usize,
    has_content: bool,
}

impl Lexer {
    /// A lexer over `script`.
    pub fn new(script: &str) -> Self {
        Lexer {
            chars: script.chars().collect(),
            pos: 0,
            line: 1,
            buffer: String::new(),
            buffer_line: 1,
            has_content: false,
        }
    }

    /// Takes the query buffer if it holds more than whitespace and comments,
    /// with the line where it starts.
    pub fn take_buffer(&mut self) -> Option<(usize, String)> {
        let taken = std::mem::take(&mut self.buffer);
        let had_content = std::mem::replace(&mut self.has_content, false);
        had_content.then_some((self.buffer_line, taken))
    }

    /// The next statement or meta-command, or `None` at the end of the script.
    pub fn next_item(&mut self, vars: &Variables) -> Result<Option<Item>, LexError> {
        while let Some(c) = self.peek(0) {
            match c {
                '\'' => {
                    let escapes = self.previous_is_escape_prefix();
                    self.content_mark();
                    self.bump();
                    self.quoted('\'', escapes)?;
                }
                '"' => {
                    self.content_mark();
                    self.bump();
                    self.quoted('"', false)?;
                }
                '$' => {
                    self.content_mark();
                    self.dollar()?;
                }
                '-' if self.peek(1) == Some('-') => self.line_comment(),
                '/' if self.peek(1) == Some('*') => self.block_comment()?,
                ';' => {
                    self.content_mark();
                    self.bump();
                    let line = self.buffer_line;
                    let sql = std::mem::take(&mut self.buffer);
                    self.has_content = false;
                    return Ok(Some(Item::Statement { line, sql }));
                }
                '\\' => return Ok(Some(self.meta(vars))),
                ':' => {
                    self.content_mark();
                    self.colon(vars);
                }
                c if c.is_whitespace() => self.bump(),
                _ => {
                    self.content_mark();
                    self.bump();
                }
            }
        }
        Ok(None)
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    /// Copies the current character into the buffer.
    fn bump(&mut self) {
        if let Some(c) = self.peek(0) {
            self.buffer.push(c);
            self.skip();
        }
    }

    /// Moves past the current character without copying it.
    fn skip(&mut self) {
        if let Some(c) = self.peek(0) {
            if c == '\n' {
                self.line += 1;
            }
            self.pos += 1;
        }
    }

    fn content_mark(&mut self) {
        if !self.has_content {
            self.has_content = true;
            self.buffer_line = self.line;
        }
    }

    /// `E'…'` (or `e'…'`) takes backslash escapes; `name'…'` does not exist,
    /// so the prefix counts only when it is a word of its own.
    fn previous_is_escape_prefix(&self) -> bool {
        let before = |n: usize| self.pos.checked_sub(n).and_then(|i| self.chars.get(i));
        matches!(before(1), Some('E' | 'e')) && !before(2).is_some_and(|c| is_ident(*c))
    }

    /// Copies a quoted body up to and including the closing `quote`.
    fn quoted(&mut self, quote: char, escapes: bool) -> Result<(), LexError> {
        let start = self.line;
        while let Some(c) = self.peek(0) {
            self.bump();
            if escapes && c == '\\' {
                self.bump();
            } else if c == quote {
                return Ok(());
            }
        }
        Err(LexError {
            line: start,
            detail: format!("unterminated {quote}-quoted text"),
        })
    }

    /// A `$` outside quotes: a dollar quote opener, or a plain character
    /// (inside an identifier, or a parameter such as `$1`).
    fn dollar(&mut self) -> Result<(), LexError> {
        let inside_word = self
            .pos
            .checked_sub(1)
            .and_then(|i| self.chars.get(i))
            .is_some_and(|c| is_ident(*c));
        let tag = if inside_word { None } else { self.dollar_tag() };
        let Some(tag) = tag else {
            self.bump();
            return Ok(());
        };
        let start = self.line;
        for _ in 0..tag.len() {
            self.bump();
        }
        while self.peek(0).is_some() {
            if self.chars[self.pos..].starts_with(&tag) {
                for _ in 0..tag.len() {
                    self.bump();
                }
                return Ok(());
            }
            self.bump();
        }
        Err(LexError {
            line: start,
            detail: format!(
                "unterminated dollar-quoted text {}",
                tag.iter().collect::<String>()
            ),
        })
    }

    /// The dollar-quote tag at the current position (`$$` or `$name$`).
    fn dollar_tag(&self) -> Option<Vec<char>> {
        let mut end = self.pos + 1;
        while let Some(&c) = self.chars.get(end) {
            if c == '$' {
                return Some(self.chars[self.pos..=end].to_vec());
            }
            let first = end == self.pos + 1;
            if !(c == '_' || c.is_alphabetic() || (!first && c.is_ascii_digit())) {
                return None;
            }
            end += 1;
        }
        None
    }

    fn line_comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                return;
            }
            self.bump();
        }
    }

    fn block_comment(&mut self) -> Result<(), LexError> {
        let start = self.line;
        let mut depth = 0_usize;
        while let Some(c) = self.peek(0) {
            if c == '/' && self.peek(1) == Some('*') {
                depth += 1;
                self.bump();
                self.bump();
            } else if c == '*' && self.peek(1) == Some('/') {
                self.bump();
                self.bump();
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            } else {
                self.bump();
            }
        }
        Err(LexError {
            line: start,
            detail: "unterminated /* comment".to_owned(),
        })
    }

    /// `::` (a cast) or `:name` (interpolated when `name` is set).
    fn colon(&mut self, vars: &Variables) {
        if self.peek(1) == Some(':') {
            self.bump();
            self.bump();
            return;
        }
        let name = self.word_at(self.pos + 1);
        match vars.get(&name) {
            Some(value) if !name.is_empty() => {
                self.buffer.push_str(value);
                self.pos += 1 + name.chars().count();
            }
            _ => self.bump(),
        }
    }

    /// The identifier starting at `index` (empty if none).
    fn word_at(&self, index: usize) -> String {
        self.chars[index.min(self.chars.len())..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect()
    }

    /// A meta-command: the backslash, a name, and arguments to the end of the
    /// line (the newline is consumed, not buffered).
    fn meta(&mut self, vars: &Variables) -> Item {
        let line = self.line;
        self.skip();
        let mut command = String::new();
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() || c == '\\' {
                break;
            }
            command.push(c);
            self.skip();
        }
        let mut args = Vec::new();
        loop {
            while self.peek(0).is_some_and(|c| c != '\n' && c.is_whitespace()) {
                self.skip();
            }
            match self.peek(0) {
                None => break,
                Some('\n') => {
                    self.skip();
                    break;
                }
                Some(_) => args.push(self.meta_arg(vars)),
            }
        }
        Item::Meta {
            line,
            command,
            args,
        }
    }

    /// One argument of a meta-command: `'quoted'`, `:{?name}`, `:name`, or a
    /// bare word.
    fn meta_arg(&mut self, vars: &Variables) -> String {
        let mut arg = String::new();
        if self.peek(0) == Some('\'') {
            self.skip();
            while let Some(c) = self.peek(0) {
                self.skip();
                if c == '\'' {
                    if self.peek(0) == Some('\'') {
                        arg.push('\'');
                        self.skip();
                        continue;
                    }
                    break;
                }
                arg.push(c);
            }
            return arg;
        }
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() {
                break;
            }
            if c == ':' && self.peek(1) == Some('{') && self.peek(2) == Some('?') {
                let name = self.word_at(self.pos + 3);
                if self.peek(3 + name.chars().count()) == Some('}') {
                    arg.push_str(if vars.contains_key(&name) {
                        "TRUE"
                    } else {
                        "FALSE"
                    });
                    self.pos += 4 + name.chars().count();
                    continue;
                }
            }
            if c == ':' {
                let name = self.word_at(self.pos + 1);
                if let Some(value) = vars.get(&name).filter(|_| !name.is_empty()) {
                    arg.push_str(value);
                    self.pos += 1 + name.chars().count();
                    continue;
                }
            }
            arg.push(c);
            self.skip();
        }
        arg
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(script: &str, vars: &Variables) -> Vec<Item> {
        let mut lexer = Lexer::new(script);
        let mut out = Vec::new();
        while let Some(item) = lexer.next_item(vars).expect("lexes") {
            out.push(item);
        }
        if let Some((line, sql)) = lexer.take_buffer() {
            out.push(Item::Statement { line, sql });
        }
        out
    }

    fn statement(line: usize, sql: &str) -> Item {
        Item::Statement {
            line,
            sql: sql.to_owned(),
        }
    }

    #[test]
    fn semicolons_inside_quotes_comments_and_dollar_quotes_do_not_split() {
        let script =
            "SELECT 'a;b', \"c;d\", E'e\\';f' -- g;h\n;\nSELECT $x$ ; $y$ ; $x$ /* /* ; */ ; */;";
        let got = items(script, &Variables::new());
        assert_eq!(
            got,
            vec![
                statement(1, "SELECT 'a;b', \"c;d\", E'e\\';f' -- g;h\n;"),
                statement(3, "\nSELECT $x$ ; $y$ ; $x$ /* /* ; */ ; */;"),
            ]
        );
    }

    #[test]
    fn variables_interpolate_outside_quotes_only_and_casts_survive() {
        let vars = Variables::from([("n".to_owned(), "42".to_owned())]);
        let got = items("SELECT :n, ':n', $q$:n$q$, 1::int, :missing;", &vars);
        assert_eq!(
            got,
            vec![statement(1, "SELECT 42, ':n', $q$:n$q$, 1::int, :missing;")]
        );
    }

    #[test]
    fn meta_commands_keep_the_query_buffer_and_read_their_arguments() {
        let vars = Variables::from([("n".to_owned(), "7".to_owned())]);
        let mut lexer = Lexer::new("\\set a 'x y' :n\n\\if :{?n}\nSELECT 1\n\\gexec\n");
        let mut got = Vec::new();
        while let Some(item) = lexer.next_item(&vars).expect("lexes") {
            let buffer = match &item {
                Item::Meta { command, .. } if command == "gexec" => lexer.take_buffer(),
                _ => None,
            };
            got.push((item, buffer));
        }
        assert_eq!(
            got,
            vec![
                (
                    Item::Meta {
                        line: 1,
                        command: "set".to_owned(),
                        args: vec!["a".to_owned(), "x y".to_owned(), "7".to_owned()],
                    },
                    None
                ),
                (
                    Item::Meta {
                        line: 2,
                        command: "if".to_owned(),
                        args: vec!["TRUE".to_owned()],
                    },
                    None
                ),
                (
                    Item::Meta {
                        line: 4,
                        command: "gexec".to_owned(),
                        args: Vec::new(),
                    },
                    Some((3, "SELECT 1\n".to_owned()))
                ),
            ]
        );
    }

    #[test]
    fn unterminated_quotes_are_errors() {
        let mut lexer = Lexer::new("SELECT 1;\nSELECT 'oops");
        let vars = Variables::new();
        assert!(matches!(lexer.next_item(&vars), Ok(Some(_))));
        assert_eq!(
            lexer.next_item(&vars),
            Err(LexError {
                line: 2,
                detail: "unterminated '-quoted text".to_owned()
            })
        );
    }

    #[test]
    fn parameters_and_identifiers_with_dollars_are_not_quotes() {
        let got = items("SELECT $1, a$b$c FROM t;", &Variables::new());
        assert_eq!(got, vec![statement(1, "SELECT $1, a$b$c FROM t;")]);
    }
}
