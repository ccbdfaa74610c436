// `format` as regular expressions (and a length cap), enforced like `pattern`. Dates check
// days per month and leap years; a leap second must fall at 23:59:60 UTC. Hostnames: the core
// admits LDH labels only (HOSTNAME_LDH, refusing every A-label); the optional IDNA module
// (idna/index.ts) registers a `hostname` that admits A-labels (xn--…) by their syntax
// (HOSTNAME_WITH_A_LABELS) with a label check (labels.ts) deciding beside the regex whether
// their Punycode spells a valid IDNA 2008 label. Where that check does not run (property
// names) `untracked` stands in: the LDH regex.
// Formats not listed here are annotations (JSON Schema 2020-12 makes `format` an annotation by
// default): they are ignored.

const YEAR = '[0-9]{4}';
const LEAP_YEAR = '(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)';
const MONTH_DAY = '(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))';
const DATE = `(?:${YEAR}-${MONTH_DAY}|${LEAP_YEAR}-02-29)`;
const OFFSET = '(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])';
const FRAC = '(?:\\.[0-9]+)?';
const HOUR = '(?:[01][0-9]|2[0-3])';
/** Any time, leap seconds at any local minute (two more regexes below pin those down). */
const TIME = `${HOUR}:[0-5][0-9]:(?:[0-5][0-9]|60)${FRAC}${OFFSET}`;
const pad = (n: number): string => String(n).padStart(2, '0');

/** A leap second is 23:59:60 UTC: local time − offset = 23:59. With offset +hh:mm the local
 * time is one minute before hh:mm; with −hh:mm it is 23:59 − hh:mm. Two regexes over the
 * whole string (after `prefix`), one relating the minutes, one the hours; any other second
 * passes both. Z is +00:00. */
function leapRelations(prefix: string): string[] {
  const other = '[0-5][0-9]:[0-5][0-9][\\s\\S]*';
  const minutes: string[] = [];
  for (let m = 0; m < 60; m++) {
    const plus = `\\+${HOUR}:${pad((m + 1) % 60)}${m === 59 ? '|[Zz]' : ''}`;
    minutes.push(`${pad(m)}:60${FRAC}(?:${plus}|-${HOUR}:${pad(59 - m)})`);
  }
  const hours: string[] = [];
  for (let h = 0; h < 24; h++) {
    const sameHour = `\\+${pad(h)}:(?:0[1-9]|[1-5][0-9])`; // local minute < 59: no carry
    const carry = `\\+${pad((h + 1) % 24)}:00${h === 23 ? '|[Zz]' : ''}`;
    hours.push(`${pad(h)}:(?:(?:[0-4][0-9]|5[0-8]):60${FRAC}${sameHour}|59:60${FRAC}(?:${carry})|[0-5][0-9]:60${FRAC}-${pad(23 - h)}:[0-5][0-9])`);
  }
  return [`^${prefix}${HOUR}:(?:${other}|${minutes.join('|')})$`, `^${prefix}(?:${HOUR}:${other}|${hours.join('|')})$`];
}
const DUR_TIME = 'T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)';
const DUR_DATE = `(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:${DUR_TIME})?`;
const OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
const IPV4 = `${OCTET}(?:\\.${OCTET}){3}`;
const H16 = '[0-9A-Fa-f]{1,4}';
const LS32 = `(?:${H16}:${H16}|${IPV4})`;
const IPV6 = [
  `(?:${H16}:){6}${LS32}`, `::(?:${H16}:){5}${LS32}`, `(?:${H16})?::(?:${H16}:){4}${LS32}`, `(?:(?:${H16}:){0,1}${H16})?::(?:${H16}:){3}${LS32}`,
  `(?:(?:${H16}:){0,2}${H16})?::(?:${H16}:){2}${LS32}`, `(?:(?:${H16}:){0,3}${H16})?::${H16}:${LS32}`, `(?:(?:${H16}:){0,4}${H16})?::${LS32}`,
  `(?:(?:${H16}:){0,5}${H16})?::${H16}`, `(?:(?:${H16}:){0,6}${H16})?::`,
].join('|');
/** Labels must not have "--" in their 3rd and 4th characters (RFC 5891 reserves them for
 * A-labels, which ANY_LABEL admits as a separate alternative). */
const AN = '[A-Za-z0-9]';
const HOST_LABEL = `(?:${AN}(?:[A-Za-z0-9-]?${AN})?|${AN}[A-Za-z0-9-](?:(?:${AN}{2}|-${AN})(?:[A-Za-z0-9-]{0,58}${AN})?|${AN}-[A-Za-z0-9-]{0,58}${AN}))`;
const HOSTNAME = `${HOST_LABEL}(?:\\.${HOST_LABEL})*`;
/** A label or an A-label's syntax ("xn--" in any case, then LDH, ≤ 63 characters). */
const ANY_LABEL = `(?:${HOST_LABEL}|[Xx][Nn]--[A-Za-z0-9-]{0,58}${AN})`;
const HOSTNAME_A = `${ANY_LABEL}(?:\\.${ANY_LABEL})*`;
const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const EMAIL = `(?:${ATEXT}+(?:\\.${ATEXT}+)*|"(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e])*")@(?:${HOSTNAME}|\\[${IPV4}\\]|\\[IPv6:(?:${IPV6})\\])`;
const PCT = '%[0-9A-Fa-f]{2}';
const UNRESERVED = "[A-Za-z0-9._~!$&'()*+,;=-]";
const PCHAR = `(?:${UNRESERVED}|${PCT}|[:@])`;
const URI_HOST = `(?:\\[(?:${IPV6})\\]|${IPV4}|(?:${UNRESERVED}|${PCT})*)`;
const AUTHORITY = `(?:(?:${UNRESERVED}|${PCT}|:)*@)?${URI_HOST}(?::[0-9]*)?`;
const URI = `[A-Za-z][A-Za-z0-9+.-]*:(?://${AUTHORITY}(?:/${PCHAR}*)*|/(?:${PCHAR}+(?:/${PCHAR}*)*)?|${PCHAR}+(?:/${PCHAR}*)*)?(?:\\?(?:${PCHAR}|[/?])*)?(?:#(?:${PCHAR}|[/?])*)?`;

export interface FormatRule {
  readonly patterns: readonly string[];
  readonly maxLength?: number;
  /** Hostnames: the IDNA label check runs beside `patterns`; where it cannot, `untracked`
   * replaces them. */
  readonly labels?: { readonly untracked: readonly string[] };
}

/** Hostname regexes: LDH labels only, and with A-labels by their syntax. */
export const HOSTNAME_LDH = `^${HOSTNAME}$`;
export const HOSTNAME_WITH_A_LABELS = `^${HOSTNAME_A}$`;
export const HOSTNAME_MAX_LENGTH = 253;

const formats: Record<string, FormatRule> = {
  'date-time': { patterns: [`^${DATE}[Tt]${TIME}$`, ...leapRelations('[0-9-]{10}[Tt]')] },
  date: { patterns: [`^${DATE}$`] },
  time: { patterns: [`^${TIME}$`, ...leapRelations('')] },
  duration: { patterns: [`^P(?:${DUR_DATE}|${DUR_TIME}|[0-9]+W)$`] },
  email: { patterns: [`^${EMAIL}$`] },
  hostname: { patterns: [HOSTNAME_LDH], maxLength: HOSTNAME_MAX_LENGTH },
  ipv4: { patterns: [`^${IPV4}$`] },
  ipv6: { patterns: [`^(?:${IPV6})$`] },
  uri: { patterns: [`^${URI}$`] },
  uuid: { patterns: ['^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$'] },
};

/** The formats enforced, by name (others are annotations). */
export const FORMATS: Readonly<Record<string, FormatRule>> = formats;

/** Enforce `name` by `rule` from now on (an optional format module, e.g. idna/). Compile
 * before a schema is compiled: compiled grammars keep the rule they were compiled with. */
export function registerFormat(name: string, rule: FormatRule): void {
  formats[name] = rule;
}

/** The rule enforcing format `name`, or undefined (an annotation). */
export const formatRule = (name: string): FormatRule | undefined => (Object.hasOwn(formats, name) ? formats[name] : undefined);
