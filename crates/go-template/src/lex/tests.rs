use super::*;

fn kinds(input: &str) -> Vec<(ItemType, String)> {
    lex(input, true, true)
        .into_iter()
        .map(|i| (i.typ, i.val))
        .collect()
}

#[test]
fn trim_markers_need_the_space_and_eat_it() {
    use ItemType::*;
    assert_eq!(
        kinds("a  {{- 3 -}}  b"),
        vec![
            (Text, "a".into()),
            (LeftDelim, "{{".into()),
            (Number, "3".into()),
            (RightDelim, "}}".into()),
            (Text, "b".into()),
            (Eof, "".into()),
        ]
    );
    // Without the space, `-3` is a number.
    assert_eq!(kinds("{{-3}}")[1], (Number, "-3".into()));
}

#[test]
fn comments_with_trim_markers_vanish_with_the_space_around_them() {
    use ItemType::*;
    assert_eq!(
        kinds("a \n{{- /* c */ -}}\n b"),
        vec![(Text, "a".into()), (Text, "b".into()), (Eof, "".into())]
    );
}

#[test]
fn lexing_stops_at_the_first_error() {
    let items = lex("{{ 'ab }}", true, true);
    let last = items.last().unwrap();
    assert_eq!(last.typ, ItemType::Error);
    assert_eq!(last.val, "unterminated character constant");
}
