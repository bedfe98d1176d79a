// Generated from runs of helm 3.17.3 (`helm template`); checked against it by
// `helm_agrees_with_the_table`. Each row: a template snippet, then its output or the tail of
// Helm's error (what follows `at <…>: `).

pub(crate) const VALUES: &str = r#"{"n": 5, "f": 1.5, "neg": -2.5, "s": "hello", "zero": 0, "big": 12345678, "l": [1, "a", null], "e": [], "m": {"a": 1, "b": {"c": "d"}}}"#;

pub(crate) const OUTPUTS: &[(&str, &str)] = &[
    (r#"{{ hello }}"#, r#"Hello!"#),
    (
        r#"{{ abbrev 5 "hello world" }}|{{ abbrev 3 "hello world" }}|{{ abbrev 20 "hello" }}|{{ abbrev 4 "" }}"#,
        r#"he...|hello world|hello|"#,
    ),
    (
        r#"{{ abbrevboth 5 10 "1234 5678 9123" }}|{{ abbrevboth 0 4 "abcdefg" }}|{{ abbrevboth 1 6 "abcdefghij" }}|{{ abbrevboth 20 10 "abcdefghijklmno" }}"#,
        r#"...5678...|a...|abcdefghij|...ijklmno"#,
    ),
    (
        r#"{{ trunc 5 "hello world" }}|{{ trunc -5 "hello world" }}|{{ trunc -20 "hi" }}|{{ trunc 0 "hi" }}|{{ trunc 2 "héllo" }}"#,
        r#"hello|world|hi||h�"#,
    ),
    (
        r#"{{ trim "  \t hi \n " }}|{{ trimAll "$" "$$5.00$" }}|{{ trimall "ab" "abcba" }}|{{ trimSuffix "-" "hello-" }}|{{ trimPrefix "-" "-hello" }}"#,
        r#"hi|5.00|c|hello|hello"#,
    ),
    (
        r#"{{ upper "hello ß ǆ" }}|{{ lower "HELLO İ Σ" }}|{{ title "hello wORLD_x élan ǆx a-b 1a" }}|{{ untitle "Hello World  ÉLAN" }}"#,
        r#"HELLO ß Ǆ|hello i σ|Hello WORLD_x Élan ǅx A-B 1a|hello world  éLAN"#,
    ),
    (
        r#"{{ substr 0 5 "hello world" }}|{{ substr -1 2 "hello" }}|{{ substr 2 -1 "hello" }}|{{ substr 2 10 "hello" }}|{{ substr 1 2 "héllo" }}"#,
        r#"hello|he|llo|llo|�"#,
    ),
    (
        r#"{{ repeat 3 "ab" }}|{{ repeat 0 "ab" }}|{{ "x" | repeat 2 }}"#,
        r#"ababab||xx"#,
    ),
    (
        r#"{{ nospace "a b\tc\nd" }}|{{ nospace "noSpace" }}|{{ nospace "h é" }}|{{ initials "John Doe" }}|{{ initials " élan vital" }}"#,
        r#"abcd|noSpace|hÃ©|JD|Ãv"#,
    ),
    (
        r#"{{ swapcase "Hello World ǅ" }}|{{ swapcase "aBC dEf" }}"#,
        r#"hELLO wORLD ǆ|Abc DeF"#,
    ),
    (
        r#"{{ snakecase "FirstName" }}|{{ snakecase "HTTPServer" }}|{{ snakecase "NoHTTPS" }}|{{ snakecase "GO PATH" }}|{{ snakecase "http2xx" }}|{{ snakecase "HTTP20xOK" }}|{{ snakecase "Bld4Floor3rd" }}|{{ snakecase "a.b-c__d" }}|{{ snakecase "ÉtéChaud" }}|{{ snakecase "中文Word" }}"#,
        r#"first_name|http_server|no_https|go_path|http_2xx|http_20x_ok|bld4_floor_3rd|a.b_c__d|été_chaud|中文_word"#,
    ),
    (
        r#"{{ kebabcase "FirstName" }}|{{ kebabcase "some_words here" }}|{{ kebabcase "ABC" }}|{{ kebabcase "x1Y" }}"#,
        r#"first-name|some-words-here|abc|x1-y"#,
    ),
    (
        r#"{{ camelcase "http_server" }}|{{ camelcase "_complex__case_" }}|{{ camelcase "some words" }}|{{ camelcase "GOLANG_IS_GREAT" }}|{{ camelcase "_" }}|{{ camelcase "a" }}|{{ camelcase "already CamelCase" }}|{{ camelcase "x-y z" }}"#,
        r#"HttpServer|_Complex_Case_|SomeWords|GolangIsGreat|__|A|AlreadyCamelCase|XYZ"#,
    ),
    (
        r#"{{ wrap 5 "Hello World Foo" }}|{{ wrap 3 "abcdefgh ij" }}|{{ wrap 0 "a b" }}"#,
        r#"Hello
World
Foo|abcdefgh
ij|a
b"#,
    ),
    (
        r#"{{ wrapWith 5 "\t" "Hello World" }}|{{ wrapWith 3 "|" "abcdefgh ij" }}|{{ wrapWith 4 "" "abcdefgh" }}"#,
        r#"Hello	World|abc|def|gh|ij|abcd
efgh"#,
    ),
    (
        r#"{{ contains "cat" "catch" }}|{{ hasPrefix "cat" "catch" }}|{{ hasSuffix "ch" "catch" }}|{{ contains "" "x" }}"#,
        r#"true|true|true|true"#,
    ),
    (
        r#"{{ quote "a\"b" }}|{{ quote 1 nil 2.5 true }}|{{ quote .Values.n }}|{{ quote .Values.missing }}|{{ quote "tab\there\x01é\u00a0" }}|{{ quote (list 1 "a") }}"#,
        r#""a\"b"|"1" "2.5" "true"|"5"||"tab\there\x01é\u00a0"|"[1 a]""#,
    ),
    (
        r#"{{ squote "a'b" }}|{{ squote 1 nil .Values.f }}|{{ squote (list 1 "a") }}"#,
        r#"'a'b'|'1' '1.5'|'[1 a]'"#,
    ),
    (
        r#"{{ cat "a" nil "b" 1 .Values.f }}|{{ cat }}|{{ cat nil }}|{{ cat (list 1 2) (dict "a" 1) }}"#,
        r#"a b 1 1.5|||[1 2] map[a:1]"#,
    ),
    (
        r#"{{ indent 2 "a\nb" }}|{{ nindent 2 "a\nb" }}|{{ indent 0 "x" }}|{{ indent 2 "" }}"#,
        r#"  a
  b|
  a
  b|x|  "#,
    ),
    (
        r#"{{ replace " " "-" "a b c" }}|{{ replace "" "-" "abc" }}|{{ "aaa" | replace "a" "bb" }}"#,
        r#"a-b-c|-a-b-c-|bbbbbb"#,
    ),
    (
        r#"{{ plural "one" "many" 1 }}|{{ plural "one" "many" 2 }}|{{ plural "one" "many" 0 }}"#,
        r#"one|many|many"#,
    ),
    (
        r#"{{ toString 1 }}|{{ toString .Values.f }}|{{ toString .Values.big }}|{{ toString nil }}|{{ toString true }}|{{ toString (list 1 "a") }}|{{ toString .Values.m }}|{{ toString (int64 5) }}"#,
        r#"1|1.5|1.2345678e+07|<nil>|true|[1 a]|map[a:1 b:map[c:d]]|5"#,
    ),
    (
        r#"{{ toStrings (list 1 "a" nil 2.5) }}|{{ toStrings "x" }}|{{ toStrings nil }}|{{ toStrings .Values.l }}"#,
        r#"[1 a 2.5]|[x]|[]|[1 a]"#,
    ),
    (
        r#"{{ split "," "a,b,c" }}|{{ (split "," "a,b")._1 }}|{{ splitn "," 2 "a,b,c" }}|{{ splitn "," 0 "a,b" }}|{{ splitn "," -1 "a,b" }}"#,
        r#"map[_0:a _1:b _2:c]|b|map[_0:a _1:b,c]|map[]|map[_0:a _1:b]"#,
    ),
    (
        r#"{{ splitList "," "a,b,c" }}|{{ splitList "" "aé" }}|{{ splitList "," "" }}|{{ len (splitList "x" "axbx") }}"#,
        r#"[a b c]|[a é]|[]|3"#,
    ),
    (
        r#"{{ join "-" (list 1 "a" nil 2.5) }}|{{ join "," "abc" }}|{{ join "," nil }}|{{ join "," .Values.l }}|{{ join "," (splitList "/" "a/b") }}"#,
        r#"1-a-2.5|abc||1,a|a,b"#,
    ),
    (
        r#"{{ sortAlpha (list "b" "a" "C" 10 2) }}|{{ sortAlpha "x" }}|{{ sortAlpha nil }}|{{ sortAlpha 3 }}"#,
        r#"[10 2 C a b]|[x]|[<nil>]|[3]"#,
    ),
    (
        r#"{{ atoi "42" }}|{{ atoi "x" }}|{{ atoi "0x10" }}|{{ atoi "99999999999999999999" }}|{{ atoi " 1" }}|{{ atoi "+7" }}"#,
        r#"42|0|0|9223372036854775807|0|7"#,
    ),
    (
        r#"{{ int "0x10" }}|{{ int "010" }}|{{ int "10.0" }}|{{ int "10.5" }}|{{ int "1_000" }}|{{ int .Values.f }}|{{ int .Values.neg }}|{{ int true }}|{{ int nil }}|{{ int "abc" }}|{{ int (list 1) }}"#,
        r#"16|8|10|0|1000|1|-2|1|0|0|0"#,
    ),
    (
        r#"{{ int64 "0b101" }}|{{ int64 .Values.big }}|{{ typeOf (int64 1) }}|{{ typeOf (int 1) }}|{{ int64 "-9223372036854775808" }}"#,
        r#"5|12345678|int64|int|-9223372036854775808"#,
    ),
    (
        r#"{{ float64 "1.5" }}|{{ float64 "1_000.5" }}|{{ float64 "0x10" }}|{{ float64 "0x1p-2" }}|{{ float64 "1e400" }}|{{ float64 "inf" }}|{{ float64 1 }}|{{ float64 true }}|{{ float64 "x" }}|{{ typeOf (float64 1) }}"#,
        r#"1.5|1000.5|0|0.25|0|+Inf|1|1|0|float64"#,
    ),
    (
        r#"{{ toDecimal "0777" }}|{{ toDecimal 777 }}|{{ toDecimal .Values.n }}|{{ toDecimal "8" }}|{{ toDecimal "-17" }}|{{ typeOf (toDecimal 1) }}"#,
        r#"511|511|5|0|-15|int64"#,
    ),
    (
        r#"{{ typeOf 1 }}|{{ typeOf 1.5 }}|{{ typeOf .Values.n }}|{{ typeOf "s" }}|{{ typeOf nil }}|{{ typeOf (list) }}|{{ typeOf (dict) }}|{{ typeOf true }}|{{ typeOf (add 1 2) }}"#,
        r#"int|float64|float64|string|<nil>|[]interface {}|map[string]interface {}|bool|int64"#,
    ),
    (
        r#"{{ typeIs "int" 1 }}|{{ typeIs "float64" .Values.n }}|{{ typeIsLike "int" 1 }}|{{ typeIsLike "string" 1 }}"#,
        r#"true|true|true|false"#,
    ),
    (
        r#"{{ kindOf 1 }}|{{ kindOf (list) }}|{{ kindOf (dict) }}|{{ kindOf nil }}|{{ kindOf "x" }}|{{ kindIs "map" .Values.m }}|{{ kindIs "slice" .Values.l }}|{{ kindIs "invalid" nil }}"#,
        r#"int|slice|map|invalid|string|true|true|true"#,
    ),
    (
        r#"{{ deepEqual 1 1 }}|{{ deepEqual 1 1.0 }}|{{ deepEqual (list 1 "a") (list 1 "a") }}|{{ deepEqual (dict "a" 1) (dict "a" 1) }}|{{ deepEqual .Values.n 5 }}|{{ deepEqual .Values.n 5.0 }}|{{ deepEqual nil nil }}|{{ deepEqual (int64 1) 1 }}"#,
        r#"true|false|true|true|false|true|true|false"#,
    ),
    (
        r#"{{ seq 3 }}|{{ seq 0 }}|{{ seq -2 }}|{{ seq 2 5 }}|{{ seq 5 2 }}|{{ seq 0 2 10 }}|{{ seq 10 -3 0 }}|{{ seq 10 3 0 }}|{{ seq }}|{{ seq 1 2 3 4 }}"#,
        r#"1 2 3|1 0|1 0 -1 -2|2 3 4 5|5 4 3 2|0 2 4 6 8 10|10 7 4 1|||"#,
    ),
    (
        r#"{{ until 3 }}|{{ until -3 }}|{{ until 0 }}|{{ typeOf (index (until 2) 0) }}|{{ untilStep 0 10 3 }}|{{ untilStep 10 0 -4 }}|{{ untilStep 0 10 -1 }}|{{ untilStep 0 10 0 }}"#,
        r#"[0 1 2]|[0 -1 -2]|[]|int|[0 3 6 9]|[10 6 2]|[]|[]"#,
    ),
    (
        r#"{{ add1 1 }}|{{ add1 .Values.f }}|{{ add 1 2 3 }}|{{ add }}|{{ add 1 .Values.f "3" }}|{{ add 9223372036854775807 1 }}|{{ typeOf (add1 1) }}"#,
        r#"2|2|6|0|5|-9223372036854775808|int64"#,
    ),
    (
        r#"{{ sub 5 3 }}|{{ sub .Values.n 10 }}|{{ div 7 2 }}|{{ div -7 2 }}|{{ mod 7 3 }}|{{ mod -7 3 }}|{{ mul 2 3 4 }}|{{ mul 5 }}|{{ mul .Values.f 2 }}"#,
        r#"2|-5|3|-3|1|-1|24|5|2"#,
    ),
    (
        r#"{{ max 1 5 3 }}|{{ biggest 1 5 }}|{{ min 4 2 8 }}|{{ max .Values.f }}|{{ min "7" 9 }}|{{ typeOf (max 1) }}"#,
        r#"5|5|2|1|7|int64"#,
    ),
    (
        r#"{{ maxf 1 5.5 3 }}|{{ minf 1.5 -2 }}|{{ maxf "x" }}|{{ typeOf (maxf 1) }}"#,
        r#"5.5|-2|0|float64"#,
    ),
    (
        r#"{{ add1f 1.1 }}|{{ addf 1.1 2.2 }}|{{ addf }}|{{ subf 0.3 0.1 }}|{{ mulf 1.1 3 }}|{{ divf 1 3 }}|{{ divf 2 3 }}|{{ divf 10 4 2 }}|{{ divf -2 3 }}|{{ addf .Values.f "2.5" }}|{{ mulf 0.1 0.1 0.1 }}|{{ subf 5 }}"#,
        r#"2.1|3.3|0|0.2|3.3|0.3333333333333333|0.6666666666666667|1.25|-0.6666666666666667|4|0.001|5"#,
    ),
    (
        r#"{{ ceil 1.1 }}|{{ ceil -1.1 }}|{{ floor 1.9 }}|{{ floor .Values.neg }}|{{ ceil "2.5" }}|{{ typeOf (ceil 1) }}"#,
        r#"2|-1|1|-3|3|float64"#,
    ),
    (
        r#"{{ round 3.14159 2 }}|{{ round 2.5 0 }}|{{ round -2.5 0 }}|{{ round 1.25 1 }}|{{ round 123.4 -1 }}|{{ round 0.85 1 0.6 }}|{{ round .Values.f 0 }}"#,
        r#"3.14|3|-3|1.3|120|0.8|2"#,
    ),
    (
        r#"{{ default "x" "" }}|{{ default "x" "y" }}|{{ default "x" 0 }}|{{ default "x" false }}|{{ default "x" .Values.missing }}|{{ default "x" (list) }}|{{ default "x" (dict) }}|{{ default "x" .Values.zero }}|{{ .Values.s | default "x" }}|{{ default 1 }}"#,
        r#"x|y|x|x|x|x|x|x|hello|1"#,
    ),
    (
        r#"{{ empty 0 }}|{{ empty "" }}|{{ empty " " }}|{{ empty nil }}|{{ empty (list) }}|{{ empty (dict) }}|{{ empty false }}|{{ empty .Values.zero }}|{{ empty .Values.m }}|{{ empty 0.0 }}|{{ empty .Values.e }}"#,
        r#"true|true|false|true|true|true|true|true|false|true|true"#,
    ),
    (
        r#"{{ coalesce "" 0 "a" "b" }}|{{ coalesce nil "" }}|{{ coalesce }}|{{ coalesce .Values.missing .Values.s }}"#,
        r#"a|<no value>|<no value>|hello"#,
    ),
    (
        r#"{{ all 1 "a" true }}|{{ all 1 "" }}|{{ all }}|{{ any 0 "" "x" }}|{{ any 0 "" }}|{{ any }}"#,
        r#"true|false|true|true|false|false"#,
    ),
    (
        r#"{{ compact (list 1 0 "" nil "a" false (list)) }}|{{ mustCompact (list) }}|{{ compact .Values.l }}"#,
        r#"[1 a]|[]|[1 a]"#,
    ),
    (
        r#"{{ ternary "a" "b" true }}|{{ ternary "a" "b" false }}|{{ true | ternary 1 2 }}"#,
        r#"a|b|1"#,
    ),
    (
        r#"{{ deepCopy .Values.m }}|{{ $d := dict "a" (dict "b" 1) }}{{ $c := deepCopy $d }}{{ $_ := set $c.a "b" 2 }}{{ $d }} {{ $c }}|{{ mustDeepCopy (list 1 2) }}"#,
        r#"map[a:1 b:map[c:d]]|map[a:map[b:1]] map[a:map[b:2]]|[1 2]"#,
    ),
    (
        r#"{{ list 1 "a" nil 2.5 }}|{{ list }}|{{ tuple 1 2 }}|{{ typeOf (list 1) }}"#,
        r#"[1 a <nil> 2.5]|[]|[1 2]|[]interface {}"#,
    ),
    (
        r#"{{ push (list 1) 2 }}|{{ append .Values.l 3 }}|{{ mustPush (list) 1 }}|{{ prepend (list 1) 0 }}|{{ mustAppend (splitList "," "a") "b" }}"#,
        r#"[1 2]|[1 a <nil> 3]|[1]|[0 1]|[a b]"#,
    ),
    (
        r#"{{ first (list 1 2) }}|{{ first (list) }}|{{ last (list 1 2) }}|{{ last (list) }}|{{ rest (list 1 2 3) }}|{{ rest (list) }}|{{ initial (list 1 2 3) }}|{{ initial (list) }}|{{ mustFirst .Values.l }}"#,
        r#"1|<no value>|2|<no value>|[2 3]|[]|[1 2]|[]|1"#,
    ),
    (
        r#"{{ reverse (list 1 2 3) }}|{{ reverse (list) }}|{{ uniq (list 1 2 1 "a" "a" 1.0) }}|{{ uniq (list (list 1) (list 1)) }}|{{ without (list 1 2 3 2) 2 }}|{{ without (list 1 2 3) 1 3 }}"#,
        r#"[3 2 1]|[]|[1 2 a 1]|[[1]]|[1 3]|[2]"#,
    ),
    (
        r#"{{ has 1 (list 1 2) }}|{{ has "1" (list 1 2) }}|{{ has 1 nil }}|{{ has 5.0 .Values.l }}|{{ has 1.0 .Values.l }}|{{ mustHas "a" .Values.l }}"#,
        r#"true|false|false|false|true|true"#,
    ),
    (
        r#"{{ slice (list 1 2 3 4) 1 3 }}|{{ slice (list 1 2 3) 1 }}|{{ slice (list 1 2 3) }}|{{ slice (list) }}|{{ slice (list 1 2 3) "1" 2.0 }}|{{ slice (list 1 2) 2 }}"#,
        r#"[2 3]|[2 3]|[1 2 3]|<no value>|[2]|[]"#,
    ),
    (
        r#"{{ concat (list 1) (list 2 3) .Values.l }}|{{ concat }}|{{ concat (list) }}"#,
        r#"[1 2 3 1 a <nil>]|[]|[]"#,
    ),
    (
        r#"{{ chunk 2 (list 1 2 3 4 5) }}|{{ chunk 3 (list 1 2 3) }}|{{ chunk 2 (list) }}|{{ chunk -1 (list 1 2) }}|{{ mustChunk 5 (list 1) }}"#,
        r#"[[1 2] [3 4] [5]]|[[1 2 3]]|[]|[]|[[1]]"#,
    ),
    (
        r#"{{ dict "a" 1 "b" "x" }}|{{ dict "a" }}|{{ dict 1 2 nil 3 }}|{{ dict }}|{{ typeOf (dict) }}"#,
        r#"map[a:1 b:x]|map[a:]|map[1:2 <nil>:3]|map[]|map[string]interface {}"#,
    ),
    (
        r#"{{ get (dict "a" 1) "a" }}|{{ get (dict "a" 1) "b" }}|{{ get .Values.m "b" }}|{{ get nil "x" }}"#,
        r#"1||map[c:d]|"#,
    ),
    (
        r#"{{ $d := dict "a" 1 }}{{ $_ := set $d "b" 2 }}{{ $d }}|{{ set (dict) "k" "v" }}|{{ $m := .Values.m }}{{ $_ := set $m "z" 1 }}{{ .Values.m.z }}"#,
        r#"map[a:1 b:2]|map[k:v]|1"#,
    ),
    (
        r#"{{ unset (dict "a" 1 "b" 2) "a" }}|{{ unset (dict) "x" }}|{{ unset nil "x" }}"#,
        r#"map[b:2]|map[]|map[]"#,
    ),
    (
        r#"{{ hasKey (dict "a" 1) "a" }}|{{ hasKey (dict "a" nil) "a" }}|{{ hasKey (dict) "a" }}|{{ hasKey nil "a" }}"#,
        r#"true|true|false|false"#,
    ),
    (
        r#"{{ pluck "a" (dict "a" 1) (dict "b" 2) (dict "a" 3) }}|{{ pluck "a" }}|{{ keys (dict "b" 1 "a" 2) | sortAlpha }}|{{ keys (dict "a" 1) (dict "b" 2 "a" 3) | sortAlpha }}|{{ keys }}|{{ values (dict "a" 1) }}|{{ values (dict) }}"#,
        r#"[1 3]|[]|[a b]|[a a b]|[]|[1]|[]"#,
    ),
    (
        r#"{{ pick (dict "a" 1 "b" 2 "c" 3) "a" "c" "x" }}|{{ omit (dict "a" 1 "b" 2 "c" 3) "a" "x" }}|{{ pick nil "a" }}|{{ omit (dict "a" 1) }}"#,
        r#"map[a:1 c:3]|map[b:2 c:3]|map[]|map[a:1]"#,
    ),
    (
        r#"{{ dig "b" "c" "def" .Values.m }}|{{ dig "x" "y" "def" .Values.m }}|{{ dig "a" "def" .Values.m }}|{{ dig "b" "def" .Values.m }}"#,
        r#"d|def|1|map[c:d]"#,
    ),
    (
        r#"{{ merge (dict "a" 1 "b" (dict "c" 1)) (dict "a" 2 "b" (dict "d" 2) "e" 3) | toJson }}|{{ merge (dict "a" 0 "b" false "c" "" "d" nil) (dict "a" 5 "b" true "c" "x" "d" 1) | toJson }}|{{ merge (dict "a" 1) (dict "a" nil "b" nil) | toJson }}"#,
        r#"{"a":1,"b":{"c":1,"d":2},"e":3}|{"a":5,"b":true,"c":"x","d":1}|{"a":1}"#,
    ),
    (
        r#"{{ mergeOverwrite (dict "a" 1 "b" (dict "c" 1 "k" 0)) (dict "a" 2 "b" (dict "d" 2 "k" 5)) | toJson }}|{{ mergeOverwrite (dict "a" 1 "b" true) (dict "a" 0 "b" false) | toJson }}|{{ mergeOverwrite (dict "a" 1) (dict "a" nil) | toJson }}"#,
        r#"{"a":2,"b":{"c":1,"d":2,"k":5}}|{"a":0,"b":false}|{"a":null}"#,
    ),
    (
        r#"{{ merge (dict "l" (list 1)) (dict "l" (list 2 3)) | toJson }}|{{ mergeOverwrite (dict "l" (list 1)) (dict "l" (list 2 3)) | toJson }}|{{ merge (dict "l" (list)) (dict "l" (list 2)) | toJson }}|{{ merge (dict "a" "x") (dict "a" (dict "b" 1)) | toJson }}|{{ mergeOverwrite (dict "a" "x") (dict "a" (dict "b" 1)) | toJson }}|{{ merge (dict "a" (dict "b" 1)) (dict "a" "x") | toJson }}|{{ mergeOverwrite (dict "a" (dict "b" 1)) (dict "a" "x") | toJson }}"#,
        r#"{"l":[1]}|{"l":[2,3]}|{"l":[2]}|{"a":"x"}|{"a":{"b":1}}|{"a":{"b":1}}|{"a":"x"}"#,
    ),
    (
        r#"{{ merge (dict) (dict "a" 1) (dict "a" 2 "b" 2) | toJson }}|{{ mustMerge (dict "a" 1) | toJson }}|{{ mustMergeOverwrite (dict "a" 1) (dict "a" 2) (dict "a" 3) | toJson }}|{{ $d := dict "a" 1 }}{{ $_ := merge $d (dict "b" 2) }}{{ $d | toJson }}|{{ merge nil (dict "a" 1) | toJson }}|{{ merge (dict "a" 1) nil | toJson }}"#,
        r#"{"a":1,"b":2}|{"a":1}|{"a":3}|{"a":1,"b":2}|{"a":1}|{"a":1}"#,
    ),
    (
        r#"{{ regexMatch "^[a-z]+$" "abc" }}|{{ regexMatch "\\d" "a1" }}|{{ regexMatch "(" "x" }}|{{ mustRegexMatch "a.c" "abc" }}|{{ regexMatch "^\\w+$" "é" }}|{{ regexMatch "^\\pL+$" "é" }}"#,
        r#"true|true|false|true|false|true"#,
    ),
    (
        r#"{{ regexFind "[a-z]+" "123abc456def" }}|{{ regexFind "x" "abc" }}|{{ mustRegexFind "b+" "abbbc" }}"#,
        r#"abc||bbb"#,
    ),
    (
        r#"{{ regexFindAll "[2,4,6,8]" "123456789" -1 }}|{{ regexFindAll "[2,4,6,8]" "123456789" 2 }}|{{ regexFindAll "a*" "baaac" -1 }}|{{ regexFindAll "x" "abc" -1 }}|{{ regexFindAll "." "abc" 0 }}|{{ mustRegexFindAll "\\b\\w" "hi there é" -1 }}"#,
        r#"[2 4 6 8]|[2 4]|[ aaa ]|[]|[]|[h t]"#,
    ),
    (
        r#"{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}|{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "$1W" }}|{{ regexReplaceAll "a(?P<x>x*)b" "-ab-axxb-" "[$x]" }}|{{ regexReplaceAll "a*" "baaac" "-" }}|{{ regexReplaceAll "b" "abc" "$$" }}|{{ regexReplaceAll "b" "abc" "$" }}|{{ regexReplaceAll "(b)" "abc" "${1" }}|{{ regexReplaceAll "" "abc" "-" }}"#,
        r#"-W-xxW-|---|-[]-[xx]-|-b-c-|a$c|a$c|a${1c|-a-b-c-"#,
    ),
    (
        r#"{{ regexReplaceAllLiteral "a(x*)b" "-ab-axxb-" "${1}" }}|{{ mustRegexReplaceAll "[aeiou]" "hello" "_" }}|{{ mustRegexReplaceAllLiteral "\\." "a.b" "$0" }}"#,
        r#"-${1}-${1}-|h_ll_|a$0b"#,
    ),
    (
        r#"{{ regexSplit "z+" "pizza" -1 }}|{{ regexSplit "z+" "pizza" 1 }}|{{ regexSplit "z+" "pizza" 0 }}|{{ regexSplit "" "abc" -1 }}|{{ regexSplit "a" "" -1 }}|{{ regexSplit "," "a,b,c" 2 }}|{{ mustRegexSplit "\\s+" " a  b " -1 }}"#,
        r#"[pi a]|[pizza]|[]|[a b c]|[]|[a b,c]|[ a b ]"#,
    ),
    (
        r#"{{ regexQuoteMeta "1.2.3+[x]" }}|{{ regexQuoteMeta "a\\b$^" }}"#,
        r#"1\.2\.3\+\[x\]|a\\b\$\^"#,
    ),
    (
        r#"{{ regexMatch "[[:alpha:]]+" "ab" }}|{{ regexMatch "^[a[]+$" "a[" }}|{{ regexFind "(?i)HELLO" "say hello" }}|{{ regexFind "a{2}" "aaa" }}|{{ regexFind "a{" "a{" }}|{{ regexFind "\\Q.*\\E" "x.*y" }}|{{ regexFind "\\101" "zA" }}|{{ regexMatch "^[\\d\\s]+$" "1 2" }}|{{ regexFind "[^\\D]+" "ab12" }}"#,
        r#"true|true|hello|aa|a{|.*|A|true|12"#,
    ),
];

pub(crate) const ERRORS: &[(&str, &str)] = &[
    (
        r#"{{ substr 3 2 "hello" }}"#,
        r#"error calling substr: runtime error: slice bounds out of range [3:2]"#,
    ),
    (
        r#"{{ substr -1 10 "hello" }}"#,
        r#"error calling substr: runtime error: slice bounds out of range [:10] with length 5"#,
    ),
    (
        r#"{{ substr -1 -1 "hello" }}"#,
        r#"error calling substr: runtime error: slice bounds out of range [:-1]"#,
    ),
    (
        r#"{{ substr 6 -1 "hello" }}"#,
        r#"error calling substr: runtime error: slice bounds out of range [6:5]"#,
    ),
    (
        r#"{{ repeat -1 "a" }}"#,
        r#"error calling repeat: strings: negative Repeat count"#,
    ),
    (
        r#"{{ indent -1 "a" }}"#,
        r#"error calling indent: strings: negative Repeat count"#,
    ),
    (r#"{{ trunc 1.5 "x" }}"#, r#"expected integer; found 1.5"#),
    (r#"{{ upper 1 }}"#, r#"expected string; found 1"#),
    (
        r#"{{ div 1 0 }}"#,
        r#"error calling div: runtime error: integer divide by zero"#,
    ),
    (
        r#"{{ mod 1 0 }}"#,
        r#"error calling mod: runtime error: integer divide by zero"#,
    ),
    (
        r#"{{ divf 1 0 }}"#,
        r#"error calling divf: decimal division by 0"#,
    ),
    (
        r#"{{ addf "inf" 1 }}"#,
        r#"error calling addf: Cannot create a Decimal from +Inf"#,
    ),
    (
        r#"{{ first "abc" }}"#,
        r#"error calling first: Cannot find first on type string"#,
    ),
    (
        r#"{{ first .Values.missing }}"#,
        r#"error calling first: runtime error: invalid memory address or nil pointer dereference"#,
    ),
    (
        r#"{{ last 1 }}"#,
        r#"error calling last: Cannot find last on type int"#,
    ),
    (
        r#"{{ rest (dict) }}"#,
        r#"error calling rest: Cannot find rest on type map"#,
    ),
    (
        r#"{{ initial true }}"#,
        r#"error calling initial: Cannot find initial on type bool"#,
    ),
    (
        r#"{{ reverse 1.5 }}"#,
        r#"error calling reverse: Cannot find reverse on type float64"#,
    ),
    (
        r#"{{ uniq "a" }}"#,
        r#"error calling uniq: Cannot find uniq on type string"#,
    ),
    (
        r#"{{ without "a" 1 }}"#,
        r#"error calling without: Cannot find without on type string"#,
    ),
    (
        r#"{{ has 1 "a" }}"#,
        r#"error calling has: Cannot find has on type string"#,
    ),
    (
        r#"{{ push "a" 1 }}"#,
        r#"error calling push: Cannot push on type string"#,
    ),
    (
        r#"{{ prepend nil 1 }}"#,
        r#"error calling prepend: runtime error: invalid memory address or nil pointer dereference"#,
    ),
    (
        r#"{{ mustPush 5 1 }}"#,
        r#"error calling mustPush: Cannot push on type int"#,
    ),
    (
        r#"{{ compact "x" }}"#,
        r#"error calling compact: Cannot compact on type string"#,
    ),
    (
        r#"{{ slice "abc" 1 }}"#,
        r#"error calling slice: list should be type of slice or array but string"#,
    ),
    (
        r#"{{ slice (list 1 2 3) 2 5 }}"#,
        r#"error calling slice: reflect.Value.Slice: slice index out of bounds"#,
    ),
    (
        r#"{{ slice (list 1 2 3) 2 1 }}"#,
        r#"error calling slice: reflect.Value.Slice: slice index out of bounds"#,
    ),
    (
        r#"{{ slice nil }}"#,
        r#"error calling slice: runtime error: invalid memory address or nil pointer dereference"#,
    ),
    (
        r#"{{ concat (list 1) "a" }}"#,
        r#"error calling concat: Cannot concat type string as list"#,
    ),
    (
        r#"{{ concat nil }}"#,
        r#"error calling concat: runtime error: invalid memory address or nil pointer dereference"#,
    ),
    (
        r#"{{ chunk 0 (list 1 2) }}"#,
        r#"error calling chunk: runtime error: makeslice: len out of range"#,
    ),
    (
        r#"{{ chunk -1 (list 1 2 3) }}"#,
        r#"error calling chunk: runtime error: makeslice: len out of range"#,
    ),
    (
        r#"{{ chunk 2 "ab" }}"#,
        r#"error calling chunk: Cannot chunk type string"#,
    ),
    (
        r#"{{ mustChunk 2 (dict) }}"#,
        r#"error calling mustChunk: Cannot chunk type map"#,
    ),
    (
        r#"{{ dig "a" "b" "d" (dict "a" "x") }}"#,
        r#"error calling dig: interface conversion: interface {} is string, not map[string]interface {}"#,
    ),
    (
        r#"{{ dig "a" "d" "notamap" }}"#,
        r#"error calling dig: interface conversion: interface {} is string, not map[string]interface {}"#,
    ),
    (
        r#"{{ dig "a" "d" nil }}"#,
        r#"error calling dig: interface conversion: interface {} is nil, not map[string]interface {}"#,
    ),
    (
        r#"{{ dig 1 "d" (dict) }}"#,
        r#"error calling dig: interface conversion: interface {} is int, not string"#,
    ),
    (
        r#"{{ dig "a" (dict) }}"#,
        r#"error calling dig: dig needs at least three arguments"#,
    ),
    (
        r#"{{ dig "a" "b" "d" (dict "a" nil) }}"#,
        r#"error calling dig: interface conversion: interface {} is nil, not map[string]interface {}"#,
    ),
    (
        r#"{{ set .Values.missing "a" 1 }}"#,
        r#"wrong type for value; expected map[string]interface {}; got interface {}"#,
    ),
    (
        r#"{{ set "x" "a" 1 }}"#,
        r#"can't handle "x" for arg of type map[string]interface {}"#,
    ),
    (
        r#"{{ get (list) "a" }}"#,
        r#"wrong type for value; expected map[string]interface {}; got []interface {}"#,
    ),
    (r#"{{ fail "boom" }}"#, r#"boom"#),
    (
        r#"{{ regexFind "(" "x" }}"#,
        r#"error calling regexFind: regexp: Compile(`(`): error parsing regexp: missing closing ): `(`"#,
    ),
    (
        r#"{{ mustRegexFind "(" "x" }}"#,
        r#"error calling mustRegexFind: error parsing regexp: missing closing ): `(`"#,
    ),
    (
        r#"{{ regexFindAll "a)" "x" -1 }}"#,
        r#"error calling regexFindAll: regexp: Compile(`a)`): error parsing regexp: unexpected ): `a)`"#,
    ),
    (
        r#"{{ mustRegexReplaceAll "[a" "x" "y" }}"#,
        r#"error calling mustRegexReplaceAll: error parsing regexp: missing closing ]: `[a`"#,
    ),
    (
        r#"{{ regexSplit "*" "x" -1 }}"#,
        r#"error calling regexSplit: regexp: Compile(`*`): error parsing regexp: missing argument to repetition operator: `*`"#,
    ),
    (
        r#"{{ mustRegexSplit "a**" "x" -1 }}"#,
        r#"error calling mustRegexSplit: error parsing regexp: invalid nested repetition operator: `**`"#,
    ),
    (
        r#"{{ mustRegexMatch "\\1" "x" }}"#,
        r#"error calling mustRegexMatch: error parsing regexp: invalid escape sequence: `\1`"#,
    ),
    (
        r#"{{ mustRegexMatch "a{1001}" "x" }}"#,
        r#"error calling mustRegexMatch: error parsing regexp: invalid repeat count: `{1001}`"#,
    ),
    (
        r#"{{ mustRegexMatch "x\\" "x" }}"#,
        r#"error calling mustRegexMatch: error parsing regexp: trailing backslash at end of expression: ``"#,
    ),
    (
        r#"{{ mustRegexMatch "[z-a]" "x" }}"#,
        r#"error calling mustRegexMatch: error parsing regexp: invalid character class range: `z-a`"#,
    ),
    (
        r#"{{ mustRegexMatch "\\y" "x" }}"#,
        r#"error calling mustRegexMatch: error parsing regexp: invalid escape sequence: `\y`"#,
    ),
    (
        r#"{{ ternary 1 2 "yes" }}"#,
        r#"expected bool; found "yes""#,
    ),
    (
        r#"{{ until .Values.n }}"#,
        r#"wrong type for value; expected int; got float64"#,
    ),
    (
        r#"{{ deepCopy nil }}"#,
        r#"error calling deepCopy: reflect: call of reflect.Value.Type on zero Value"#,
    ),
    (
        r#"{{ mustDeepCopy nil }}"#,
        r#"error calling mustDeepCopy: reflect: call of reflect.Value.Type on zero Value"#,
    ),
    (
        r#"{{ get .Values.missing "x" }}"#,
        r#"wrong type for value; expected map[string]interface {}; got interface {}"#,
    ),
    (
        r#"{{ merge .Values.missing (dict "a" 1) }}"#,
        r#"wrong type for value; expected map[string]interface {}; got interface {}"#,
    ),
    (
        r#"{{ set nil "a" 1 }}"#,
        r#"error calling set: assignment to entry in nil map"#,
    ),
];
