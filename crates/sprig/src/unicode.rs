//! Go's `unicode` package as the string functions use it: category tests by general category
//! (`IsUpper` is `Lu`, `IsPunct` is `P*`…) and the one-rune "simple" case mappings, which
//! differ from Rust's full mappings (`ToUpper('ß')` is `ß`, not `SS`).

use unicode_general_category::{GeneralCategory as G, get_general_category};

pub(crate) fn is_upper(c: char) -> bool {
    get_general_category(c) == G::UppercaseLetter
}

pub(crate) fn is_lower(c: char) -> bool {
    get_general_category(c) == G::LowercaseLetter
}

pub(crate) fn is_title(c: char) -> bool {
    get_general_category(c) == G::TitlecaseLetter
}

pub(crate) fn is_letter(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
    )
}

pub(crate) fn is_digit(c: char) -> bool {
    get_general_category(c) == G::DecimalNumber
}

pub(crate) fn is_number(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::DecimalNumber | G::LetterNumber | G::OtherNumber
    )
}

pub(crate) fn is_punct(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
    )
}

/// `unicode.IsSpace`: the White_Space property (the same set Rust uses).
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace()
}

/// `unicode.IsSpace` of a single byte taken as a rune (goutils walks strings byte by byte).
pub(crate) fn is_space_byte(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ' | 0x85 | 0xA0)
}

/// Go's simple uppercase mapping.
pub(crate) fn to_upper(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    // Greek letters with a subscript iota: their full uppercase is two runes, their simple
    // one the titlecase form.
    match c as u32 {
        0x1F80..=0x1FAF if (c as u32) & 0xF < 8 => {
            return char::from_u32(c as u32 + 8).unwrap_or(c);
        }
        0x1FB3 => return '\u{1FBC}',
        0x1FC3 => return '\u{1FCC}',
        0x1FF3 => return '\u{1FFC}',
        _ => {}
    }
    single(c.to_uppercase()).unwrap_or(c)
}

/// Go's simple lowercase mapping.
pub(crate) fn to_lower(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    if c == '\u{130}' {
        return 'i';
    }
    single(c.to_lowercase()).unwrap_or(c)
}

/// Go's simple titlecase mapping: the uppercase one but for the digraphs (`ǆ` → `ǅ`) and
/// Georgian, whose letters are their own titlecase.
pub(crate) fn to_title(c: char) -> char {
    match c as u32 {
        0x1C4..=0x1C6 => '\u{1C5}',
        0x1C7..=0x1C9 => '\u{1C8}',
        0x1CA..=0x1CC => '\u{1CB}',
        0x1F1..=0x1F3 => '\u{1F2}',
        0x10D0..=0x10FA | 0x10FD..=0x10FF => c,
        0x1F88..=0x1F8F | 0x1F98..=0x1F9F | 0x1FA8..=0x1FAF | 0x1FBC | 0x1FCC | 0x1FFC => c,
        _ => to_upper(c),
    }
}

fn single(mut it: impl Iterator<Item = char>) -> Option<char> {
    let first = it.next()?;
    it.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_mappings_are_one_rune() {
        assert_eq!(to_upper('ß'), 'ß');
        assert_eq!(to_upper('ǆ'), 'Ǆ');
        assert_eq!(to_title('ǆ'), 'ǅ');
        assert_eq!(to_lower('İ'), 'i');
        assert_eq!(to_lower('Σ'), 'σ');
        assert!(is_punct('¿') && !is_punct('$'));
        assert!(is_space_byte(0xA0) && !is_space_byte(0xC3));
    }
}
