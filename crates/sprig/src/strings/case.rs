//! huandu/xstrings' case conversions (the version sprig 3.3.0 pins): `camelcase` makes
//! `HttpServer` of `http_server`; `snakecase` and `kebabcase` split words at case changes,
//! digits and connectors (`HTTPServer2xx` → `http_server_2xx`).

use crate::unicode::{is_letter, is_number, is_punct, is_space, is_upper, to_lower, to_upper};

/// Go's `utf8.RuneError`: xstrings skips it as if it were an invalid byte.
const RUNE_ERROR: char = '\u{FFFD}';

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || is_space(c)
}

/// A letter that is not a CJK ideograph.
fn is_alphabet(c: char) -> bool {
    if !is_letter(c) {
        return false;
    }
    let u = c as u32;
    if u < 0x3400 {
        return true;
    }
    !((0x4E00..=0x9FCC).contains(&u)
        || (0x3400..=0x4D85).contains(&u)
        || (0x2_0000..=0x2_B81D).contains(&u))
}

/// xstrings' `ToCamelCase`: connectors removed and the rune after each one uppercased,
/// the first rune uppercased, runs of capitals lowercased after their first.
pub(crate) fn to_camel(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    let mut r0 = '\0';
    let mut first_upper = false;
    let mut decoded = false;
    for c in chars.by_ref() {
        r0 = c;
        decoded = true;
        if !is_connector(c) {
            first_upper = is_upper(c);
            r0 = to_upper(c);
            break;
        }
        out.push(c);
    }
    let rest = chars.as_str();
    if rest.is_empty() {
        if decoded {
            out.push(r0);
        }
        return out;
    }
    for c in rest.chars() {
        let r1 = r0;
        r0 = c;
        if is_connector(r0) && is_connector(r1) {
            out.push(r1);
            continue;
        }
        if is_connector(r1) {
            first_upper = is_upper(r0);
            r0 = to_upper(r0);
        } else {
            if first_upper {
                if is_upper(r0) {
                    r0 = to_lower(r0);
                } else {
                    first_upper = false;
                }
            }
            out.push(r1);
        }
    }
    out.push(r0);
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Word {
    Invalid,
    Number,
    Upper,
    Alphabet,
    Connector,
    Punct,
    Other,
}

/// The next valid rune of `s` and the bytes up to and including it; `prev` and all of `s`
/// when only invalid runes are left.
fn next_valid(s: &str, prev: char) -> (char, usize) {
    let mut size = 0;
    for c in s.chars() {
        size += c.len_utf8();
        if c != RUNE_ERROR {
            return (c, size);
        }
    }
    (prev, size)
}

/// xstrings' `nextWord`: the kind of the next word, the word, and what follows it.
fn next_word(s: &str) -> (Word, &str, &str) {
    if s.is_empty() {
        return (Word::Invalid, "", "");
    }
    let mut remaining = s;
    let (mut r, mut size) = next_valid(remaining, RUNE_ERROR);
    let mut offset = size;
    if r == RUNE_ERROR {
        return (Word::Invalid, &s[..offset], &s[offset..]);
    }
    let run =
        |remaining: &mut &str, offset: &mut usize, mut r: char, keep: &dyn Fn(char) -> bool| {
            while !remaining.is_empty() {
                let (nr, nsize) = next_valid(remaining, r);
                r = nr;
                if !keep(r) {
                    break;
                }
                *offset += nsize;
                *remaining = &remaining[nsize..];
            }
            r
        };
    let kind;
    if is_connector(r) {
        kind = Word::Connector;
        remaining = &remaining[size..];
        run(&mut remaining, &mut offset, r, &is_connector);
    } else if is_punct(r) {
        kind = Word::Punct;
        remaining = &remaining[size..];
        run(&mut remaining, &mut offset, r, &is_punct);
    } else if is_upper(r) {
        kind = Word::Upper;
        remaining = &remaining[size..];
        if !remaining.is_empty() {
            (r, size) = next_valid(remaining, r);
            if is_upper(r) {
                let mut prev_size = size;
                offset += size;
                remaining = &remaining[size..];
                while !remaining.is_empty() {
                    (r, size) = next_valid(remaining, r);
                    if !is_upper(r) {
                        break;
                    }
                    prev_size = size;
                    offset += size;
                    remaining = &remaining[size..];
                }
                if !remaining.is_empty() && is_alphabet(r) {
                    offset -= prev_size;
                    remaining = &s[offset..];
                }
            } else if is_alphabet(r) {
                offset += size;
                remaining = &remaining[size..];
                run(&mut remaining, &mut offset, r, &|c| {
                    is_alphabet(c) && !is_upper(c)
                });
            }
        }
    } else if is_alphabet(r) {
        kind = Word::Alphabet;
        remaining = &remaining[size..];
        run(&mut remaining, &mut offset, r, &|c| {
            is_alphabet(c) && !is_upper(c)
        });
    } else if is_number(r) {
        kind = Word::Number;
        remaining = &remaining[size..];
        run(&mut remaining, &mut offset, r, &is_number);
    } else {
        kind = Word::Other;
        remaining = &remaining[size..];
        run(&mut remaining, &mut offset, r, &|c| {
            !(is_connector(c) || is_alphabet(c) || is_number(c) || is_punct(c))
        });
    }
    (kind, &s[..offset], remaining)
}

fn write_lower(out: &mut String, kind: Word, word: &str, connector: char) {
    if kind != Word::Upper && kind != Word::Connector {
        out.push_str(word);
        return;
    }
    for c in word.chars() {
        if is_connector(c) {
            out.push(connector);
        } else if is_upper(c) {
            out.push(to_lower(c));
        } else {
            out.push(c);
        }
    }
}

/// xstrings' `camelCaseToLowerCase`: words lowercased and joined with `connector`.
pub(crate) fn to_lower_words(s: &str, connector: char) -> String {
    if s.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(s.len() + 8);
    let (mut wt, mut word, mut remaining) = next_word(s);
    while !remaining.is_empty() {
        if wt != Word::Connector {
            write_lower(&mut out, wt, word, connector);
        }
        let prev = wt;
        let last = word;
        (wt, word, remaining) = next_word(remaining);
        match prev {
            Word::Number => {
                while wt == Word::Alphabet || wt == Word::Number {
                    write_lower(&mut out, wt, word, connector);
                    (wt, word, remaining) = next_word(remaining);
                }
                if wt != Word::Invalid && wt != Word::Punct && wt != Word::Connector {
                    out.push(connector);
                }
            }
            Word::Connector => write_lower(&mut out, prev, last, connector),
            Word::Punct => {}
            _ => {
                if wt != Word::Number {
                    if wt != Word::Connector && wt != Word::Punct {
                        out.push(connector);
                    }
                    continue;
                }
                if remaining.is_empty() {
                    continue;
                }
                let last = word;
                (wt, word, remaining) = next_word(remaining);
                if wt != Word::Alphabet {
                    write_lower(&mut out, Word::Number, last, connector);
                    if wt != Word::Connector && wt != Word::Punct {
                        out.push(connector);
                    }
                    continue;
                }
                out.push(connector);
                write_lower(&mut out, Word::Number, last, connector);
                while wt == Word::Alphabet || wt == Word::Number {
                    write_lower(&mut out, wt, word, connector);
                    (wt, word, remaining) = next_word(remaining);
                }
                if wt != Word::Invalid && wt != Word::Connector && wt != Word::Punct {
                    out.push(connector);
                }
            }
        }
    }
    write_lower(&mut out, wt, word, connector);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xstrings_samples() {
        for (input, snake) in [
            ("FirstName", "first_name"),
            ("HTTPServer", "http_server"),
            ("NoHTTPS", "no_https"),
            ("GO_PATH", "go_path"),
            ("GO PATH", "go_path"),
            ("GO-PATH", "go_path"),
            ("http2xx", "http_2xx"),
            ("HTTP20xOK", "http_20x_ok"),
            ("Duration2m3s", "duration_2m3s"),
            ("Bld4Floor3rd", "bld4_floor_3rd"),
        ] {
            assert_eq!(to_lower_words(input, '_'), snake, "{input}");
        }
        assert_eq!(to_lower_words("HTTPServer", '-'), "http-server");
        assert_eq!(to_camel("http_server"), "HttpServer");
        assert_eq!(
            to_camel("some words GOLANG_IS_GREAT"),
            "SomeWordsGolangIsGreat"
        );
    }
}
