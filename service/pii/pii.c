/* pii: PII and secret detectors; see pii.h for what each kind matches. */
#include "service/pii/pii.h"

#include <stdio.h>
#include <string.h>

static const char *const kind_names[PII_KIND_COUNT] = {
    "email", "phone",   "payment_card", "national_id",
    "iban",  "api_key", "private_key",  "bearer_token",
};

const char *pii_kind_name(unsigned kind) {
    for (int i = 0; i < PII_KIND_COUNT; i++)
        if (kind == (1u << i)) return kind_names[i];
    return "unknown";
}

unsigned pii_kind_of(const char *name) {
    for (int i = 0; i < PII_KIND_COUNT; i++)
        if (strcmp(name, kind_names[i]) == 0) return 1u << i;
    return 0;
}

size_t pii_kind_names(unsigned kinds, const char **out, size_t max) {
    size_t n = 0;
    for (int i = 0; i < PII_KIND_COUNT && n < max; i++)
        if (kinds & (1u << i)) out[n++] = kind_names[i];
    return n;
}

/* ---- character classes (ASCII only: bytes >= 0x80 are never part of a
 * match, and count as word characters so a match cannot start right after
 * a multi-byte letter) ---- */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
static int is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
static int is_alpha(unsigned char c) { return is_upper(c) || is_lower(c); }
static int is_alnum(unsigned char c) { return is_alpha(c) || is_digit(c); }
static int is_word(unsigned char c) { return is_alnum(c) || c == '_' || c >= 0x80; }
static int is_b64url(unsigned char c) { return is_alnum(c) || c == '_' || c == '-'; }
static int is_local(unsigned char c) {
    return is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-';
}
static int is_token68(unsigned char c) {
    return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' ||
           c == '=';
}

typedef struct {
    const unsigned char *s;
    size_t n;
} text;

static unsigned char at(const text *t, size_t i) { return i < t->n ? t->s[i] : 0; }

/* Counts chars of class cls from i, at most max. */
static size_t run(const text *t, size_t i, int (*cls)(unsigned char), size_t max) {
    size_t k = 0;
    while (k < max && i + k < t->n && cls(t->s[i + k])) k++;
    return k;
}

static int starts(const text *t, size_t i, const char *lit) {
    size_t l = strlen(lit);
    return i + l <= t->n && memcmp(t->s + i, lit, l) == 0;
}

/* ---- private key blocks ---- */

static size_t find_lit(const text *t, size_t from, const char *lit) {
    size_t l = strlen(lit);
    if (from >= t->n) return (size_t)-1;
    const unsigned char *p = memmem(t->s + from, t->n - from, lit, l);
    return p ? (size_t)(p - t->s) : (size_t)-1;
}

static size_t match_private_key(const text *t, size_t i) {
    if (!starts(t, i, "-----BEGIN ")) return 0;
    /* "-----BEGIN [RSA |EC |OPENSSH |ENCRYPTED |DSA ]PRIVATE KEY-----" */
    size_t j = i + 11, k = 0;
    while (k < 24 && (is_upper(at(t, j + k)) || at(t, j + k) == ' ')) k++;
    size_t label_end = j + k;
    /* "PRIVATE KEY-----" must close the label run. */
    size_t pk = (size_t)-1;
    for (size_t q = j; q + 16 <= t->n && q <= label_end; q++)
        if (starts(t, q, "PRIVATE KEY-----")) {
            pk = q;
            break;
        }
    if (pk == (size_t)-1) return 0;
    size_t end = find_lit(t, pk + 16, "-----END ");
    if (end == (size_t)-1) return t->n - i; /* unterminated: the rest is key material */
    size_t close = find_lit(t, end + 9, "-----");
    return (close == (size_t)-1 ? t->n : close + 5) - i;
}

/* ---- bearer tokens and JWTs ---- */

static size_t match_jwt(const text *t, size_t i) {
    if (!starts(t, i, "eyJ")) return 0;
    size_t a = run(t, i, is_b64url, 8192);
    if (a < 10 || at(t, i + a) != '.' || !starts(t, i + a + 1, "eyJ")) return 0;
    size_t b = run(t, i + a + 1, is_b64url, 8192);
    if (b < 10 || at(t, i + a + 1 + b) != '.') return 0;
    size_t c = run(t, i + a + 2 + b, is_b64url, 8192);
    if (c < 10) return 0;
    return a + b + c + 2;
}

static size_t match_bearer(const text *t, size_t i) {
    static const char word[] = "bearer";
    for (size_t k = 0; k < 6; k++) {
        unsigned char c = at(t, i + k);
        if ((c | 0x20) != (unsigned char)word[k]) return 0;
    }
    size_t j = i + 6, sp = 0;
    while (at(t, j + sp) == ' ' && sp < 4) sp++;
    if (sp == 0) return 0;
    size_t tok = run(t, j + sp, is_token68, 8192);
    if (tok < 20) return 0;
    return 6 + sp + tok;
}

/* ---- API keys ---- */

static int is_upper_or_digit(unsigned char c) { return is_upper(c) || is_digit(c); }

static size_t match_api_key(const text *t, size_t i) {
    size_t k;
    if ((starts(t, i, "AKIA") || starts(t, i, "ASIA")) &&
        run(t, i + 4, is_upper_or_digit, 17) == 16)
        return 20;
    if (starts(t, i, "gh") &&
        (at(t, i + 2) == 'p' || at(t, i + 2) == 'o' || at(t, i + 2) == 'u' || at(t, i + 2) == 's' ||
         at(t, i + 2) == 'r') &&
        at(t, i + 3) == '_' && (k = run(t, i + 4, is_alnum, 256)) >= 36)
        return 4 + k;
    if (starts(t, i, "github_pat_") && (k = run(t, i + 11, is_b64url, 256)) >= 22) return 11 + k;
    if (starts(t, i, "xox") && strchr("abprs", at(t, i + 3)) && at(t, i + 3) &&
        at(t, i + 4) == '-' && (k = run(t, i + 5, is_b64url, 256)) >= 10)
        return 5 + k;
    if (starts(t, i, "AIza") && (k = run(t, i + 4, is_b64url, 64)) == 35) return 39;
    if ((starts(t, i, "sk_live_") || starts(t, i, "rk_live_")) &&
        (k = run(t, i + 8, is_alnum, 256)) >= 24)
        return 8 + k;
    if (starts(t, i, "sk-") && (k = run(t, i + 3, is_b64url, 512)) >= 32) return 3 + k;
    return 0;
}

/* ---- e-mail ---- */

static size_t match_email(const text *t, size_t i) {
    size_t local = run(t, i, is_local, 65);
    if (local == 0 || local > 64 || at(t, i + local) != '@') return 0;
    if (t->s[i] == '.' || t->s[i + local - 1] == '.') return 0;
    size_t d = i + local + 1, len = 0, dots = 0, label = 0, last_label_start = d;
    while (len < 255 && d + len < t->n) {
        unsigned char c = t->s[d + len];
        if (is_alnum(c) || c == '-') {
            label++;
        } else if (c == '.' && label > 0 && is_alnum(at(t, d + len + 1))) {
            dots++;
            label = 0;
            last_label_start = d + len + 1;
        } else {
            break;
        }
        len++;
    }
    if (dots == 0 || label < 2) return 0;
    for (size_t q = last_label_start; q < d + len; q++)
        if (!is_alpha(t->s[q])) return 0; /* a TLD is letters only */
    return local + 1 + len;
}

/* ---- digit groups: cards, SSNs, phones ---- */

static int luhn_ok(const char *digits, size_t n) {
    int sum = 0;
    for (size_t k = 0; k < n; k++) {
        int d = digits[n - 1 - k] - '0';
        if (k % 2 == 1) {
            d *= 2;
            if (d > 9) d -= 9;
        }
        sum += d;
    }
    return sum % 10 == 0;
}

static int card_prefix_ok(const char *d, size_t n) {
    int two = (d[0] - '0') * 10 + (d[1] - '0');
    int four = two * 100 + (d[2] - '0') * 10 + (d[3] - '0');
    int three = four / 10;
    if (d[0] == '4') return n == 13 || n == 16 || n == 19;                           /* Visa */
    if ((two >= 51 && two <= 55) || (four >= 2221 && four <= 2720)) return n == 16;  /* MC */
    if (two == 34 || two == 37) return n == 15;                                      /* Amex */
    if (four == 6011 || two == 65 || (three >= 644 && three <= 649)) return n >= 16; /* Discover */
    if (two == 35) return n >= 16;                                                   /* JCB */
    if (two == 30 || two == 36 || two == 38) return n >= 14;                         /* Diners */
    if (two == 62) return n >= 16;                                                   /* UnionPay */
    return 0;
}

static size_t match_card(const text *t, size_t i) {
    char digits[20];
    size_t nd = 0, j = i, last_end = 0;
    while (j < t->n && nd < 19) {
        unsigned char c = t->s[j];
        if (is_digit(c)) {
            digits[nd++] = (char)c;
            j++;
            last_end = j;
        } else if ((c == ' ' || c == '-') && is_digit(at(t, j + 1)) && nd > 0) {
            j++;
        } else {
            break;
        }
    }
    if (nd < 13 || is_digit(at(t, last_end)) || is_word(at(t, last_end))) return 0;
    if (!card_prefix_ok(digits, nd) || !luhn_ok(digits, nd)) return 0;
    return last_end - i;
}

static size_t match_ssn(const text *t, size_t i) {
    if (i + 11 > t->n) return 0;
    const unsigned char *s = t->s + i;
    for (int k = 0; k < 11; k++) {
        if (k == 3 || k == 6) {
            if (s[k] != '-') return 0;
        } else if (!is_digit(s[k])) {
            return 0;
        }
    }
    if (is_digit(at(t, i + 11)) || at(t, i + 11) == '-' || is_word(at(t, i + 11))) return 0;
    int area = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
    int group = (s[4] - '0') * 10 + (s[5] - '0');
    int serial = (s[7] - '0') * 1000 + (s[8] - '0') * 100 + (s[9] - '0') * 10 + (s[10] - '0');
    if (area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0) return 0;
    return 11;
}

static int phone_sep(unsigned char c) { return c == ' ' || c == '-' || c == '.'; }

static size_t match_phone(const text *t, size_t i) {
    size_t j = i, nd = 0;
    if (at(t, i) == '+') {
        j++;
        if (!is_digit(at(t, j))) return 0;
        size_t last_end = 0;
        while (j < t->n && nd <= 15) {
            unsigned char c = t->s[j];
            if (is_digit(c)) {
                nd++;
                j++;
                last_end = j;
            } else if ((phone_sep(c) || c == '(' || c == ')') &&
                       (is_digit(at(t, j + 1)) || at(t, j + 1) == '(' ||
                        (c == ')' && at(t, j + 1) == ' '))) {
                j++;
            } else {
                break;
            }
        }
        if (nd < 8 || nd > 15 || is_word(at(t, last_end))) return 0;
        return last_end - i;
    }
    /* North American: (ddd) ddd-dddd | ddd-ddd-dddd | ddd.ddd.dddd */
    if (at(t, i) == '(') {
        if (run(t, i + 1, is_digit, 4) != 3 || at(t, i + 4) != ')') return 0;
        j = i + 5;
        if (at(t, j) == ' ') j++;
    } else {
        if (run(t, i, is_digit, 4) != 3) return 0;
        j = i + 3;
        if (!phone_sep(at(t, j)) || at(t, j) == ' ') return 0;
        j++;
    }
    unsigned char sep = at(t, i) == '(' ? '-' : at(t, i + 3);
    if (run(t, j, is_digit, 4) != 3 || at(t, j + 3) != sep) return 0;
    if (run(t, j + 4, is_digit, 5) != 4) return 0;
    size_t end = j + 8;
    if (is_word(at(t, end)) || at(t, end) == sep) return 0;
    if (at(t, i) != '(' && at(t, i) == '0') return 0;
    return end - i;
}

/* ---- IBAN ---- */

typedef struct {
    char cc[3];
    unsigned char len;
} iban_country;

/* Total IBAN lengths of the SEPA countries and other common ones. */
static const iban_country iban_lengths[] = {
    {"AD", 24}, {"AE", 23}, {"AT", 20}, {"BA", 20}, {"BE", 16}, {"BG", 22}, {"BH", 22}, {"BR", 29},
    {"CH", 21}, {"CY", 28}, {"CZ", 24}, {"DE", 22}, {"DK", 18}, {"EE", 20}, {"ES", 24}, {"FI", 18},
    {"FO", 18}, {"FR", 27}, {"GB", 22}, {"GI", 23}, {"GL", 18}, {"GR", 27}, {"HR", 21}, {"HU", 28},
    {"IE", 22}, {"IL", 23}, {"IS", 26}, {"IT", 27}, {"JO", 30}, {"KW", 30}, {"KZ", 20}, {"LB", 28},
    {"LI", 21}, {"LT", 20}, {"LU", 20}, {"LV", 21}, {"MC", 27}, {"MD", 24}, {"ME", 22}, {"MK", 19},
    {"MT", 31}, {"MU", 30}, {"NL", 18}, {"NO", 15}, {"PK", 24}, {"PL", 28}, {"PT", 25}, {"QA", 29},
    {"RO", 24}, {"RS", 22}, {"SA", 24}, {"SE", 24}, {"SI", 19}, {"SK", 24}, {"SM", 27}, {"TN", 24},
    {"TR", 26}, {"UA", 29}, {"VA", 22}, {"VG", 24}, {"XK", 20},
};

static int iban_length(const unsigned char *cc) {
    for (size_t k = 0; k < sizeof iban_lengths / sizeof iban_lengths[0]; k++)
        if (iban_lengths[k].cc[0] == cc[0] && iban_lengths[k].cc[1] == cc[1])
            return iban_lengths[k].len;
    return 0;
}

static size_t match_iban(const text *t, size_t i) {
    if (!is_upper(at(t, i)) || !is_upper(at(t, i + 1)) || !is_digit(at(t, i + 2)) ||
        !is_digit(at(t, i + 3)))
        return 0;
    int want = iban_length(t->s + i);
    if (!want) return 0;
    char c[34];
    size_t nc = 0, j = i, last_end = 0;
    while (j < t->n && nc < (size_t)want) {
        unsigned char ch = t->s[j];
        if (is_upper(ch) || is_digit(ch)) {
            c[nc++] = (char)ch;
            j++;
            last_end = j;
        } else if (ch == ' ' && nc % 4 == 0 && nc > 0 && is_alnum(at(t, j + 1))) {
            j++;
        } else {
            break;
        }
    }
    if (nc != (size_t)want || is_word(at(t, last_end))) return 0;
    /* mod 97 of the rearranged string, letters as 10..35, digit by digit. */
    unsigned rem = 0;
    for (size_t k = 0; k < nc; k++) {
        char ch = c[(k + 4) % nc];
        if (is_digit((unsigned char)ch)) rem = (rem * 10 + (unsigned)(ch - '0')) % 97;
        else rem = (rem * 100 + (unsigned)(ch - 'A' + 10)) % 97;
    }
    return rem == 1 ? last_end - i : 0;
}

/* ---- the scanner ---- */

typedef size_t (*matcher)(const text *t, size_t i);

static const struct {
    unsigned kind;
    matcher fn;
} detectors[] = {
    /* Most specific first: a JWT's payload is not an API key, an IBAN's
     * digits are not a card. */
    {PII_PRIVATE_KEY, match_private_key},
    {PII_BEARER_TOKEN, match_bearer},
    {PII_BEARER_TOKEN, match_jwt},
    {PII_API_KEY, match_api_key},
    {PII_EMAIL, match_email},
    {PII_IBAN, match_iban},
    {PII_PAYMENT_CARD, match_card},
    {PII_NATIONAL_ID, match_ssn},
    {PII_PHONE, match_phone},
};

/* The next match at or after *i: returns 1 with *i at its start, or 0. */
static int next_match(const text *t, size_t *i, unsigned *kind, size_t *len) {
    for (size_t p = *i; p < t->n; p++) {
        /* Only at the start of a word, never inside one ('-', '.', '@' and
         * '+' continue numbers, hosts and addresses). */
        unsigned char prev = p ? t->s[p - 1] : ' ';
        if (is_word(prev) || prev == '-' || prev == '.' || prev == '@' || prev == '+') continue;
        for (size_t d = 0; d < sizeof detectors / sizeof detectors[0]; d++) {
            size_t l = detectors[d].fn(t, p);
            if (l) {
                *i = p;
                *kind = detectors[d].kind;
                *len = l;
                return 1;
            }
        }
    }
    return 0;
}

unsigned pii_scan(const char *s, size_t n, pii_hit *hits, size_t max, size_t *nhits) {
    text t = {(const unsigned char *)s, n};
    unsigned kinds = 0, kind;
    size_t count = 0, i = 0, len;
    while (next_match(&t, &i, &kind, &len)) {
        if (count < max) hits[count] = (pii_hit){kind, i, len};
        count++;
        kinds |= kind;
        i += len;
    }
    if (nhits) *nhits = count;
    return kinds;
}

size_t pii_redact(const char *s, size_t n, char *out, size_t outlen, unsigned *kinds_out) {
    text t = {(const unsigned char *)s, n};
    size_t o = 0, i = 0, copied = 0, len; /* s[0..copied) is already out */
    unsigned kinds = 0, kind;
    while (next_match(&t, &i, &kind, &len)) {
        for (size_t k = copied; k < i; k++, o++)
            if (o < outlen) out[o] = s[k];
        char marker[48];
        int m = snprintf(marker, sizeof marker, PII_REDACT_FMT, pii_kind_name(kind));
        for (int k = 0; k < m; k++, o++)
            if (o < outlen) out[o] = marker[k];
        kinds |= kind;
        i += len;
        copied = i;
    }
    for (size_t k = copied; k < n; k++, o++)
        if (o < outlen) out[o] = s[k];
    if (o < outlen) out[o] = '\0';
    if (kinds_out) *kinds_out = kinds;
    return o;
}
