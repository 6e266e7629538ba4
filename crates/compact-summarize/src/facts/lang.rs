//! The words of languages other than English that fact extraction looks
//! for: cue words (constraints, decisions, open actions, errors), request
//! openers, discourse markers, negations, justification markers and the
//! "instead of X" forms of a changed plan, in Chinese, Japanese, Spanish,
//! German and French; and the script helpers (CJK characters, sentence
//! terminators, a word count that counts CJK text) the lexicon needs.
//!
//! The lists are written as a native speaker phrases a rule or a decision,
//! not from any one corpus. [`alternation`] turns a list into a regex
//! alternative: a side of a phrase that is an ASCII letter gets an ASCII
//! word boundary (`(?-u:\b)`, which keeps the regexes linear on CJK text);
//! a CJK phrase needs none (CJK is written without spaces); a trailing `*`
//! marks a stem (`decid*`: decidimos, decidido, decidir). Raw patterns
//! (`RAW_*`) hold the few rules a word list cannot say ("bitte … nicht").

/// Constraints the people who set the task state (the agent's "only" or
/// "always" is description: see [`STRONG_CONSTRAINT`]). Not German
/// `immer` nor French `toujours`: as often "still" (`immer noch`,
/// `toujours pas`) as "always". Limits (`höchstens`, `最多`) are not cues
/// on their own, as "at most" is not in English: with a number they make
/// a fact ([`NAMED_NUMBER`]), and `最多` is as often "up to".
pub(super) const CONSTRAINT: &[&str] = &[
    // Spanish
    "debe",
    "deben",
    "debemos",
    "debes",
    "deberá",
    "deberán",
    "tiene que",
    "tienen que",
    "tenemos que",
    "tienes que",
    "hay que",
    "nunca",
    "jamás",
    "solo",
    "sólo",
    "solamente",
    "únicamente",
    "siempre",
    "obligatorio",
    "obligatoria",
    "imprescindible",
    "requisito",
    "requerido",
    "requerida",
    "prohibido",
    "prohibida",
    "no está permitido",
    "no se permite",
    // German
    "muss",
    "müssen",
    "musst",
    "müsst",
    "nie",
    "niemals",
    "nur",
    "erforderlich",
    "zwingend",
    "verpflichtend",
    "pflicht",
    "verboten",
    "nicht erlaubt",
    "nicht gestattet",
    "unzulässig",
    "keinesfalls",
    "auf keinen fall",
    "soll nicht",
    "sollen nicht",
    "sollte nicht",
    "sollten nicht",
    // French
    "doit",
    "doivent",
    "devons",
    "devez",
    "devra",
    "devront",
    "il faut",
    "jamais",
    "seulement",
    "uniquement",
    "obligatoire",
    "obligatoirement",
    "impératif",
    "impérativement",
    "exigé",
    "exigée",
    "requis",
    "requise",
    "interdit",
    "interdite",
    "pas autorisé",
    "non autorisé",
    "surtout pas",
    "en aucun cas",
    "veuillez ne pas",
    "merci de ne pas",
    "prière de ne pas",
    "ne jamais",
    // Chinese
    "必须",
    "必需",
    "务必",
    "一定要",
    "不要",
    "不准",
    "不许",
    "不允许",
    "不可以",
    "不应",
    "不能超过",
    "不可超过",
    "别用",
    "千万别",
    "禁止",
    "严禁",
    "只能",
    "只允许",
    "仅限",
    "总是",
    "始终",
    "永远不",
    "绝不",
    "决不",
    "绝对不",
    "从不",
    "要求",
    // Japanese
    "なければならない",
    "なければなりません",
    "なくてはいけない",
    "なくてはならない",
    "てはいけない",
    "てはいけません",
    "てはならない",
    "ないでください",
    "必ず",
    "必須",
    "絶対に",
    "決して",
    "厳禁",
    "のみ",
    "だけ",
    "べき",
];

/// Constraints that are rules whoever says them.
pub(super) const STRONG_CONSTRAINT: &[&str] = &[
    // Spanish
    "debe",
    "deben",
    "debemos",
    "tiene que",
    "tienen que",
    "hay que",
    "obligatorio",
    "obligatoria",
    "prohibido",
    "no está permitido",
    "no se permite",
    // German
    "muss",
    "müssen",
    "erforderlich",
    "verboten",
    "nicht erlaubt",
    "sollte nicht",
    "sollten nicht",
    // French
    "doit",
    "doivent",
    "il faut",
    "obligatoire",
    "interdit",
    "requis",
    "veuillez ne pas",
    "merci de ne pas",
    "ne jamais",
    // Chinese
    "必须",
    "务必",
    "一定要",
    "不要",
    "不准",
    "不允许",
    "不可以",
    "禁止",
    "严禁",
    // Japanese
    "なければならない",
    "なければなりません",
    "てはいけない",
    "てはいけません",
    "ないでください",
    "必須",
    "厳禁",
];

/// Rules no word list says: a negated imperative.
pub(super) const RAW_STRONG_CONSTRAINT: &[&str] = &[
    // Spanish: "no cambien X", "no me llamen": `no` before a verb in the
    // formal plural imperative (the form used writing to a company).
    r"(?-u:\b)no\s+(?:(?:me|te|nos|le|les|lo|la|los|las|se)\s+)?[a-záéíóúñ]{2,}(?:en|an)(?-u:\b)",
    // German: "Bitte ändern Sie X nicht", "Fassen Sie X nicht an", "Sie
    // dürfen X nicht": the negation comes late in the sentence.
    r"(?-u:\b)(?:bitte|darf|dürfen)(?-u:\b)[^!?\n]{0,60}?(?-u:\b)(?:nicht|nie|niemals|keine[nmrs]?|kein)(?-u:\b)",
    r"^\s*[a-zäöüß]+(?:en|n)\s+sie(?-u:\b)[^!?\n]{0,60}?(?-u:\b)(?:nicht|nie|niemals|keine[nmrs]?|kein)(?-u:\b)",
    // Chinese 不得 ("must not"), not 不得不 ("cannot but", "have to").
    r"不得(?:[^不]|$)",
    // French: "ne changez pas", "n'utilisez jamais", "ne m'appelez plus".
    r"(?-u:\b)n(?:e\s+|')(?:[a-zà-ÿ']+\s+)?[a-zà-ÿ']*ez\s+(?:pas|jamais|plus|rien)(?-u:\b)",
];

/// Rules a word list cannot say, the principal's alone.
pub(super) const RAW_CONSTRAINT: &[&str] = &[
    // Chinese 只 ("only") before a verb; 只是 ("merely"), 只有 ("only
    // have"), 只好 ("had to"), 只要 ("as long as") are not rules.
    r"只[^是有好要怕剩见觉不顾管]",
    // Chinese 仅 ("only"), not 仅仅 ("merely").
    r"仅[^仅]",
];

/// Decisions and changes of plan.
pub(super) const DECISION: &[&str] = &[
    // Spanish
    "decid*",
    "decisión",
    "hemos elegido",
    "elegimos",
    "optamos",
    "hemos optado",
    "nos quedamos con",
    "nos quedaremos con",
    "vamos a usar",
    "vamos a utilizar",
    "usaremos",
    "utilizaremos",
    "en lugar de",
    "en lugar del",
    "en vez de",
    "en vez del",
    "a partir de ahora",
    "de ahora en adelante",
    "cambio de planes",
    "cambio de plan",
    "nos cambiamos",
    "cambiamos a",
    "acordamos",
    "acordado",
    "aprobado",
    "recomendamos",
    "recomiendo",
    // German
    "entschied*",
    "entscheidung",
    "beschlossen",
    "festgelegt",
    "wir nehmen",
    "wir verwenden",
    "wir nutzen",
    "wir bleiben bei",
    "wir setzen auf",
    "wir wechseln",
    "gewechselt",
    "umgestellt",
    "stattdessen",
    "anstelle",
    "ab sofort",
    "ab jetzt",
    "künftig",
    "planänderung",
    "vereinbart",
    "genehmigt",
    "empfehle*",
    // French
    "décid*",
    "on utilise",
    "on utilisera",
    "nous utiliserons",
    "nous allons utiliser",
    "on va utiliser",
    "on part sur",
    "nous partons sur",
    "avons choisi",
    "on a choisi",
    "opté",
    "au lieu de",
    "au lieu du",
    "au lieu des",
    "au lieu d'",
    "plutôt que",
    "à la place",
    "désormais",
    "dorénavant",
    "à partir de maintenant",
    "changement de plan",
    "on passe à",
    "nous passons à",
    "convenu",
    "validé",
    "approuvé",
    "recommand*",
    // Chinese
    "决定",
    "决策",
    "选择了",
    "选定",
    "选用",
    "采用",
    "改用",
    "改为",
    "改成",
    "换成",
    "而不是",
    "而非",
    "就用",
    "确定用",
    "计划有变",
    "从现在起",
    "今后",
    "同意",
    "批准",
    "建议",
    // Japanese
    "決定",
    "決めました",
    "決めた",
    "にします",
    "にしました",
    "を採用",
    "選びました",
    "代わりに",
    "ではなく",
    "に変更",
    "変更します",
    "切り替え",
    "今後は",
    "これからは",
    "合意",
    "承認",
    "推奨",
];

/// German `statt` / `anstatt` as "instead of", not the particle of
/// `stattfinden` ("findet am Freitag statt."): a word follows it.
/// Chinese 不再 ("no longer"), not the end of 不得不 ("have to") before 再
/// ("again").
pub(super) const RAW_DECISION: &[&str] = &[r"(?-u:\b)(?:an)?statt\s+\w", r"(?:^|[^得])不再"];

/// Open actions: what is still to be done or waited on.
pub(super) const ACTION: &[&str] = &[
    // Spanish
    "pendiente",
    "por hacer",
    "próximo paso",
    "siguiente paso",
    "a la espera",
    "esperando",
    "bloqueado",
    "bloqueada",
    "seguimiento",
    "todavía no",
    "aún no",
    // German
    "nächster schritt",
    "nächste schritte",
    "ausstehend",
    "noch nicht",
    "wartet auf",
    "warten auf",
    "warte auf",
    "blockiert",
    "nachfassen",
    "nachhaken",
    "ich kläre",
    "kläre ich",
    "wir klären",
    "ich kümmere mich",
    "noch zu erledigen",
    // French
    "à faire",
    "prochaine étape",
    "en attente",
    "bloqué",
    "bloquée",
    "pas encore",
    "reste à",
    "je m'en occupe",
    "je reviens vers vous",
    "relancer",
    "assurer le suivi",
    "faire le suivi",
    // Chinese
    "待办",
    "待处理",
    "下一步",
    "跟进",
    "后续",
    "等待",
    "尚未",
    "仍需",
    "还需要",
    "阻塞",
    "卡住",
    // Japanese
    "次のステップ",
    "対応中",
    "保留",
    "未対応",
    "フォローアップ",
    "確認します",
    "後ほど",
];

/// Japanese `X待ち` ("waiting for X": 返答待ち, 承認待ち), not the polite
/// お待ちしております ("we look forward to").
pub(super) const RAW_ACTION: &[&str] = &[r"\p{Han}待ち"];

/// Errors reported in prose.
pub(super) const ERROR: &[&str] = &[
    "fallo",
    "falló",
    "excepción",
    "fehler",
    "fehlgeschlagen",
    "abgestürzt",
    "erreur",
    "échec",
    "échoué",
    "错误",
    "报错",
    "失败",
    "异常",
    "崩溃",
    "エラー",
    "失敗",
    "例外",
];

/// A sentence naming one of these near a number is a fact (`puerto 8443`,
/// `最多3次`).
pub(super) const NAMED_NUMBER: &[&str] = &[
    "puerto",
    "como máximo",
    "como mínimo",
    "hasta",
    "máximo",
    "mínimo",
    "límite",
    "plazo",
    "höchstens",
    "mindestens",
    "bis zu",
    "maximal",
    "frist",
    "au plus",
    "au moins",
    "jusqu'à",
    "délai",
    "limite",
    "端口",
    "最多",
    "至少",
    "不超过",
    "上限",
    "超时",
    "重试",
    "ポート",
    "最大",
    "最小",
    "以内",
    "タイムアウト",
];

/// Units after a number, in words of these languages and CJK characters:
/// a number with a unit is a fact in any language.
pub(super) const UNITS: &[&str] = &[
    "horas",
    "minutos",
    "segundos",
    "días",
    "semanas",
    "meses",
    "años",
    "euros",
    "dólares",
    "stunden",
    "minuten",
    "sekunden",
    "tage",
    "tagen",
    "wochen",
    "monate",
    "monaten",
    "jahre",
    "jahren",
    "euro",
    "heures",
    "secondes",
    "jours",
    "semaines",
    "mois",
    "ans",
    "années",
    "毫秒",
    "秒钟",
    "秒",
    "分钟",
    "个小时",
    "小时",
    "个工作日",
    "工作日",
    "天",
    "周",
    "个星期",
    "星期",
    "个月",
    "年",
    "元",
    "欧元",
    "美元",
    "英镑",
    "日元",
    "時間",
    "分間",
    "日間",
    "週間",
    "か月",
    "ヶ月",
    "円",
];

/// Words that open a request or a question rather than a statement.
pub(super) const REQUEST_OPENERS: &[&str] = &[
    "por favor",
    "¿",
    "necesito que",
    "me gustaría que",
    "ayúdeme",
    "ayúdenme",
    "können sie",
    "könnten sie",
    "würden sie",
    "kannst du",
    "könntest du",
    "lass uns",
    "lassen sie uns",
    "pouvez-vous",
    "pourriez-vous",
    "peux-tu",
    "pourrais-tu",
    "merci de",
    "veuillez",
    "est-ce que",
    "请",
    "麻烦",
    "能否",
    "能不能",
    "可不可以",
    "可以帮",
    "帮我",
    "帮忙",
];

/// "Please" anywhere in a sentence (请 only where it opens the sentence,
/// see [`REQUEST_OPENERS`], or a clause: it is also in 申请, "to apply").
pub(super) const PLEASE: &[&str] = &[
    "，请",
    "por favor",
    "bitte",
    "s'il vous plaît",
    "s'il te plaît",
    "svp",
    "お願い",
    "ください",
];

/// How a clause that only greets, thanks, apologises or signs off opens
/// (see `lexicon::is_courtesy`).
pub(super) const COURTESY: &[&str] = &[
    "hallo",
    "guten morgen",
    "guten tag",
    "guten abend",
    "liebe",
    "lieber",
    "sehr geehrte",
    "sehr geehrter",
    "vielen dank",
    "herzlichen dank",
    "danke",
    "entschuldigung",
    "entschuldigen sie",
    "es tut mir leid",
    "tut mir leid",
    "mit freundlichen grüßen",
    "freundliche grüße",
    "viele grüße",
    "beste grüße",
    "ich freue mich auf",
    "wir freuen uns auf",
    "einen schönen tag",
    "hola",
    "buenos días",
    "buenas tardes",
    "buenas noches",
    "estimado",
    "estimada",
    "estimados",
    "muchas gracias",
    "mil gracias",
    "gracias",
    "perdón",
    "disculpe",
    "disculpen",
    "lo siento",
    "un saludo",
    "saludos",
    "atentamente",
    "quedo a la espera",
    "espero su respuesta",
    "que tenga un buen",
    "bonjour",
    "bonsoir",
    "merci",
    "cordialement",
    "désolé",
    "désolée",
    "excusez-moi",
    "bien à vous",
    "bonne journée",
    "你好",
    "您好",
    "大家好",
    "谢谢",
    "感谢",
    "多谢",
    "抱歉",
    "不好意思",
    "对不起",
    "期待您的回复",
    "期待你的回复",
    "祝好",
    "此致",
    "麻烦您了",
    "よろしくお願いします",
    "ありがとうございます",
    "すみません",
    "申し訳ありません",
];

/// Leading words that organise a conversation without stating anything.
pub(super) const DISCOURSE: &[&str] = &[
    "además",
    "por cierto",
    "también",
    "importante",
    "nota",
    "ojo",
    "en resumen",
    "resumiendo",
    "recapitulando",
    "cambio de planes",
    "actualización",
    "bueno",
    "vale",
    "pues",
    "außerdem",
    "übrigens",
    "wichtig",
    "hinweis",
    "zur info",
    "zusammengefasst",
    "kurz gesagt",
    "planänderung",
    "aussi",
    "de plus",
    "par ailleurs",
    "d'ailleurs",
    "pour rappel",
    "en résumé",
    "bref",
    "changement de plan",
    "mise à jour",
    "另外",
    "此外",
    "还有",
    "顺便说一下",
    "顺便",
    "补充一下",
    "总之",
    "总结一下",
    "注意",
    "重要",
    "计划有变",
    "更新",
    "好的",
    "那么",
    "また",
    "ちなみに",
    "なお",
    "つまり",
    "予定変更",
];

/// Where a justification starts in these languages: what follows
/// explains, it does not state (see `forms::short`). Not German `, das`,
/// `, die`: as often an article opening the clause that says what
/// ("wir haben entschieden, das Gerät mit GLS zu schicken").
pub(crate) const JUSTIFICATIONS: &[&str] = &[
    ", porque ",
    " porque ",
    ", ya que ",
    ", puesto que ",
    ", que es ",
    ", que ",
    ", es ",
    ", si no,",
    ", lo cual ",
    ", así que ",
    ", weil ",
    ", da ",
    ", denn ",
    ", sonst ",
    ", das ist ",
    ", dies ist ",
    ", diese ",
    // A relative clause (", which we placed…"): the pronoun after the
    // article tells it from a main clause (", die Kameras nutzen sie").
    ", die wir ",
    ", die ich ",
    ", die sie ",
    ", die uns ",
    ", das wir ",
    ", das ich ",
    ", das sie ",
    ", der wir ",
    ", der uns ",
    ", den wir ",
    ", den ich ",
    ", den sie ",
    ", dem wir ",
    ", parce que ",
    " parce que ",
    ", car ",
    ", puisque ",
    ", sinon ",
    ", c'est ",
    ", ce qui ",
    ", qui ",
    "，因为",
    "，由于",
    "，这是",
    "，那是",
    "，否则",
    "，不然",
    "，所以",
    "，以便",
    "；",
];

/// Words that negate what follows: a shortened sentence keeps them.
pub(crate) const NEGATIONS: &[&str] = &[
    "no", "nunca", "jamás", "sin", "ni", "nada", "nadie", "nicht", "nie", "niemals", "kein",
    "keine", "keinen", "keinem", "keiner", "keines", "ohne", "weder", "ne", "pas", "jamais",
    "sans", "aucun", "aucune", "rien",
];

/// How an agent announces what it is about to do.
pub(super) const NARRATION_OPENERS: &[&str] = &[
    "voy a",
    "vamos a ver",
    "déjame",
    "ich werde",
    "lass mich",
    "ich schaue",
    "je vais",
    "laissez-moi",
    "让我",
    "我来",
    "我先",
    "接下来我",
    "まず",
];

/// What a later statement says it replaced, followed by the replaced
/// value: `en lugar de X`, `statt X`, `au lieu de X`, `而不是X`, `不再使用X`.
pub(super) const REPLACES_BEFORE_VALUE: &str = concat!(
    r"(?i)(?:(?-u:\b)(?:en lugar de(?:l)?|en vez de(?:l)?|en sustitución de(?:l)?|ya no (?:usamos|usaremos|queremos|necesitamos|utilizamos)",
    r"|(?:an)?statt|anstelle(?: von)?|nicht mehr (?:mit|über|per)",
    r"|au lieu d(?:e|u|es|')|plutôt que|à la place d(?:e|u|es)|n'\S+ plus|ne \S+ plus)(?-u:\b)",
    r"|而不是|而非|不再(?:使用|用)?|取消|代替|取代|替换掉?)",
    r"\s*((?:[^\s.,;:!?。，；：！？、()（）]+\s*){1,4})",
);

/// Chinese `不用X了` ("no longer X") and `把X换成Y` ("change X to Y"), and
/// Japanese `Xではなく`, `Xの代わりに` ("instead of X"): the replaced value
/// comes before the marker or between two.
pub(super) const REPLACES_AROUND_VALUE: &str = concat!(
    r"不用([^，。；！？、]{1,24}?)了",
    r"|把([^，。；！？、]{1,24}?)(?:换成|改成|改为|替换为)",
    r"|([^，。；！？、]{1,24})(?:ではなく|の代わりに|をやめ)",
);

/// Articles and prepositions that start a replaced value without naming it.
pub(super) const ARTICLES: &[&str] = &[
    "the", "a", "an", "el", "la", "los", "las", "lo", "un", "una", "al", "del", "de", "der", "die",
    "das", "des", "dem", "den", "ein", "eine", "einen", "einem", "mit", "auf", "zu", "von", "le",
    "les", "l'", "du", "d'", "un", "une",
];

/// Words too common in these languages to say two statements share a
/// subject (four letters or more; see `content_words`).
pub(crate) const STOPWORDS: &[&str] = &[
    "para",
    "pero",
    "como",
    "este",
    "esta",
    "esto",
    "todo",
    "todos",
    "nuestro",
    "nuestra",
    "hemos",
    "decidimos",
    "lugar",
    "cambio",
    "planes",
    "mejor",
    "ahora",
    "haben",
    "wir",
    "nicht",
    "einen",
    "einem",
    "einer",
    "diese",
    "dieser",
    "unser",
    "unsere",
    "entschieden",
    "statt",
    "lieber",
    "doch",
    "planänderung",
    "nous",
    "avons",
    "pour",
    "dans",
    "avec",
    "plutôt",
    "décidé",
    "changement",
];

/// CJK characters that do not carry a subject: particles, pronouns,
/// negations, numerals, the cue words' characters.
const CJK_FUNCTION: &str = "的了是在和与及或而不没很吗呢吧啊个一二三四五有要会能可以用我您你他她它们这那就也都还又把被给对从到为让请再已经决定改换计划变最后想下上中";

/// Whether `c` is written without spaces between words: Han, kana,
/// Hangul, and the full-width forms and punctuation around them.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3000}'..='\u{30ff}'   // CJK punctuation, hiragana, katakana
        | '\u{3400}'..='\u{4dbf}' // Han extension A
        | '\u{4e00}'..='\u{9fff}' // Han
        | '\u{ac00}'..='\u{d7af}' // Hangul
        | '\u{f900}'..='\u{faff}' // Han compatibility
        | '\u{ff00}'..='\u{ffef}' // full-width forms
    )
}

/// Whether `c` is a letter of a script written without spaces (not its
/// punctuation).
pub(crate) fn is_cjk_letter(c: char) -> bool {
    is_cjk(c) && !is_cjk_punct(c)
}

/// CJK punctuation and full-width ASCII punctuation.
fn is_cjk_punct(c: char) -> bool {
    matches!(c, '\u{3000}'..='\u{303f}' | '\u{ff01}'..='\u{ff0f}' | '\u{ff1a}'..='\u{ff20}'
        | '\u{ff3b}'..='\u{ff40}' | '\u{ff5b}'..='\u{ff65}')
}

/// A character that ends a sentence whatever follows it: CJK full stops
/// and marks, and the sentence ends of Devanagari, Arabic, Armenian,
/// Ethiopic and Myanmar.
pub(crate) fn is_terminator(c: char) -> bool {
    matches!(
        c,
        '。' | '！' | '？' | '；' | '｡' | '।' | '॥' | '؟' | '۔' | '։' | '።' | '။'
    )
}

/// A character that closes a quote or a bracket after a sentence's end
/// (`。」`, `！）`): it belongs to the sentence it closes.
pub(crate) fn is_closer(c: char) -> bool {
    matches!(
        c,
        '」' | '』' | '）' | '】' | '〕' | '》' | '〉' | '”' | '’' | '"' | '\'' | ')' | ']'
    )
}

/// A character that may open a sentence after `. ` besides a capital
/// letter: quotes, brackets, Spanish inverted marks, CJK.
pub(crate) fn opens_sentence(c: char) -> bool {
    c.is_uppercase()
        || matches!(
            c,
            '`' | '"' | '(' | '[' | '¿' | '¡' | '«' | '„' | '“' | '‘' | '「' | '『' | '（'
        )
        || is_cjk_letter(c)
}

/// Words in `s`: runs between spaces, where a run of CJK letters counts
/// one word per two characters (about a Chinese word's length).
pub(crate) fn word_count(s: &str) -> usize {
    let mut words = 0;
    for w in s.split_whitespace() {
        let cjk = w.chars().filter(|&c| is_cjk_letter(c)).count();
        let rest = w.chars().any(|c| c.is_alphanumeric() && !is_cjk_letter(c));
        words += cjk.div_ceil(2) + usize::from(rest || cjk == 0);
    }
    words
}

/// Whether `s` is written mostly without spaces: at least half its
/// letters are CJK (an English sentence naming 東京 is cut by words).
pub(crate) fn mostly_cjk(s: &str) -> bool {
    let (mut cjk, mut letters) = (0usize, 0usize);
    for c in s.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        cjk += usize::from(is_cjk_letter(c));
    }
    cjk > 0 && 2 * cjk >= letters
}

/// The CJK bigrams of `s` that can name a subject (no particle, pronoun or
/// cue character in them): the "content words" of text without spaces.
pub(crate) fn cjk_bigrams(s: &str) -> impl Iterator<Item = String> + '_ {
    let chars: Vec<char> = s.chars().collect();
    let content = |c: char| is_cjk_letter(c) && !CJK_FUNCTION.contains(c);
    (1..chars.len()).filter_map(move |i| {
        let (a, b) = (chars[i - 1], chars[i]);
        (content(a) && content(b)).then(|| [a, b].iter().collect())
    })
}

/// Builds the alternation of a word list (see the module docs).
pub(super) fn alternation(words: &[&str]) -> String {
    let ascii_word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    words
        .iter()
        .map(|w| {
            let (w, stem) = match w.strip_suffix('*') {
                Some(s) => (s, true),
                None => (*w, false),
            };
            let lead = if ascii_word(w.chars().next()) {
                r"(?-u:\b)"
            } else {
                ""
            };
            let trail = if !stem && ascii_word(w.chars().next_back()) {
                r"(?-u:\b)"
            } else {
                ""
            };
            format!("{lead}{}{trail}", regex::escape(w))
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Characters that open a negated CJK clause (`不用X了`, `没有X`, `别X`).
pub(crate) const CJK_NEGATIONS: [char; 8] = ['不', '没', '别', '勿', '未', '非', '無', '无'];

/// A hyphenated word of letters whose last part is a capitalised word
/// (`E-Mail`, `USB-Stick`, `Support-Team`): in German text a noun, as
/// German capitalises every noun; in English it may be a name
/// (`MBPP-Plus`, `Vega-Lite`).
pub(crate) fn is_capitalised_compound(token: &str) -> bool {
    let capitalised = |part: &str| {
        let mut c = part.chars();
        c.next().is_some_and(|f| f.is_ascii_uppercase())
            && c.clone().count() >= 2
            && c.all(|l| l.is_ascii_lowercase())
    };
    token
        .split('-')
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphabetic()))
        && token.rsplit('-').next().is_some_and(capitalised)
}

/// German function words: two of them around a word say the text is
/// German.
const GERMAN: &[&str] = &[
    "der", "die", "das", "und", "ist", "nicht", "wir", "ich", "mit", "für", "auf", "ein", "eine",
    "einen", "einem", "dem", "den", "zu", "auch", "sich", "von", "bei", "noch", "hat", "haben",
    "wurde", "werden", "unser", "unsere", "unserem", "ihr", "ihre", "mein", "meine", "meinem",
];

/// Whether `text` reads as German: two different German function words.
pub(crate) fn reads_german(text: &str) -> bool {
    let mut seen: Option<&str> = None;
    for w in text.split(|c: char| !c.is_alphabetic()) {
        if let Some(g) = GERMAN.iter().find(|g| **g == w) {
            match seen {
                Some(s) if s != *g => return true,
                _ => seen = Some(g),
            }
        }
    }
    false
}
