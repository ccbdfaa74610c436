// Unicode data IDNA 2008 needs beyond what JS regular expressions expose: the RFC 5892
// exceptions table, Joining_Type (ArabicShaping.txt) for the ZERO WIDTH NON-JOINER rule, and
// Canonical_Combining_Class = Virama, derived from the engine's normalization data.

/** RFC 5892 §2.6 Exceptions (F). */
export const EXCEPTIONS: ReadonlyMap<number, 'PVALID' | 'CONTEXTO' | 'DISALLOWED'> = new Map([
  ...[0x00df, 0x03c2, 0x06fd, 0x06fe, 0x0f0b, 0x3007].map((c) => [c, 'PVALID'] as const),
  ...[0x00b7, 0x0375, 0x05f3, 0x05f4, 0x30fb].map((c) => [c, 'CONTEXTO'] as const),
  ...range(0x0660, 0x0669).map((c) => [c, 'CONTEXTO'] as const),
  ...range(0x06f0, 0x06f9).map((c) => [c, 'CONTEXTO'] as const),
  ...[0x0640, 0x07fa, 0x302e, 0x302f, 0x3031, 0x3032, 0x3033, 0x3034, 0x3035, 0x303b].map((c) => [c, 'DISALLOWED'] as const),
]);

function range(lo: number, hi: number): number[] {
  return Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
}

/** Joining_Type of the letters that join, as [first, last, type] (ArabicShaping.txt, for the
 * RFC 5892 A.1 regular expression only: D dual, R right, L left). Covered: Arabic, Arabic
 * Supplement, Arabic Extended-A/B, Syriac, N'Ko, Mandaic, Mongolian, Phags-pa, Hanifi
 * Rohingya, Adlam. Not covered (read as U, non-joining): Manichaean, Psalter Pahlavi,
 * Sogdian, Old Uyghur, Chorasmian, Syriac Supplement. Join-causing (C) letters are not in the
 * A.1 expression and are left out. Transparent (T) is every other Mn, Me or Cf code point. */
const JOINING: readonly (readonly [number, number, 'D' | 'R' | 'L'])[] = [
  [0x0620, 0x0620, 'D'], [0x0622, 0x0625, 'R'], [0x0626, 0x0626, 'D'], [0x0627, 0x0627, 'R'], [0x0628, 0x0628, 'D'], [0x0629, 0x0629, 'R'],
  [0x062a, 0x062e, 'D'], [0x062f, 0x0632, 'R'], [0x0633, 0x063f, 'D'], [0x0641, 0x0647, 'D'], [0x0648, 0x0648, 'R'], [0x0649, 0x064a, 'D'],
  [0x066e, 0x066f, 'D'], [0x0671, 0x0673, 'R'], [0x0675, 0x0677, 'R'], [0x0678, 0x0687, 'D'], [0x0688, 0x0699, 'R'], [0x069a, 0x06bf, 'D'],
  [0x06c0, 0x06c0, 'R'], [0x06c1, 0x06c2, 'D'], [0x06c3, 0x06cb, 'R'], [0x06cc, 0x06cc, 'D'], [0x06cd, 0x06cd, 'R'], [0x06ce, 0x06ce, 'D'],
  [0x06cf, 0x06cf, 'R'], [0x06d0, 0x06d1, 'D'], [0x06d2, 0x06d3, 'R'], [0x06d5, 0x06d5, 'R'], [0x06ee, 0x06ef, 'R'], [0x06fa, 0x06fc, 'D'],
  [0x06ff, 0x06ff, 'D'],
  // Syriac
  [0x0710, 0x0710, 'R'], [0x0712, 0x0714, 'D'], [0x0715, 0x0719, 'R'], [0x071a, 0x071d, 'D'], [0x071e, 0x071e, 'R'], [0x071f, 0x0727, 'D'],
  [0x0728, 0x0728, 'R'], [0x0729, 0x0729, 'D'], [0x072a, 0x072a, 'R'], [0x072b, 0x072b, 'D'], [0x072c, 0x072c, 'R'], [0x072d, 0x072e, 'D'],
  [0x072f, 0x072f, 'R'], [0x074d, 0x074d, 'R'], [0x074e, 0x0758, 'D'],
  // Arabic Supplement
  [0x0759, 0x075b, 'R'], [0x075c, 0x076a, 'D'], [0x076b, 0x076c, 'R'], [0x076d, 0x0770, 'D'], [0x0771, 0x0771, 'R'], [0x0772, 0x0772, 'D'],
  [0x0773, 0x0774, 'R'], [0x0775, 0x0777, 'D'], [0x0778, 0x0779, 'R'], [0x077a, 0x077f, 'D'],
  // N'Ko, Mandaic
  [0x07ca, 0x07ea, 'D'], [0x0840, 0x0840, 'R'], [0x0841, 0x0845, 'D'], [0x0846, 0x0847, 'R'], [0x0848, 0x0848, 'D'], [0x0849, 0x0849, 'R'],
  [0x084a, 0x0853, 'D'], [0x0854, 0x0854, 'R'], [0x0855, 0x0855, 'D'], [0x0856, 0x0858, 'R'],
  // Arabic Extended-B / -A
  [0x0870, 0x0882, 'R'], [0x0886, 0x0886, 'D'], [0x0889, 0x088d, 'D'], [0x088e, 0x088e, 'R'], [0x08a0, 0x08a9, 'D'], [0x08aa, 0x08ac, 'R'],
  [0x08ad, 0x08ad, 'D'], [0x08ae, 0x08ae, 'R'], [0x08af, 0x08b0, 'D'], [0x08b1, 0x08b2, 'R'], [0x08b3, 0x08b8, 'D'], [0x08b9, 0x08b9, 'R'],
  [0x08ba, 0x08c8, 'D'],
  // Mongolian, Phags-pa
  [0x1807, 0x1807, 'D'], [0x1820, 0x1878, 'D'], [0x1887, 0x18a8, 'D'], [0x18aa, 0x18aa, 'D'], [0xa840, 0xa871, 'D'], [0xa872, 0xa872, 'L'],
  // Hanifi Rohingya, Adlam
  [0x10d00, 0x10d00, 'L'], [0x10d01, 0x10d23, 'D'], [0x1e900, 0x1e943, 'D'],
];

const TRANSPARENT = /^[\p{Mn}\p{Me}\p{Cf}]$/u;

/** Joining_Type as the A.1 rule reads it: D, R, L, T, or U for everything else. */
export function joiningType(cp: number): 'D' | 'R' | 'L' | 'T' | 'U' {
  let lo = 0;
  let hi = JOINING.length - 1;
  while (lo <= hi) {
    const m = (lo + hi) >> 1;
    const [a, b, t] = JOINING[m]!;
    if (cp < a) hi = m - 1;
    else if (cp > b) lo = m + 1;
    else return t;
  }
  if (cp === 0x200c || cp === 0x200d) return 'U';
  return TRANSPARENT.test(String.fromCodePoint(cp)) ? 'T' : 'U';
}

/** Canonical_Combining_Class = Virama (9), from canonical reordering: a nonzero class below
 * 230 (it moves before U+0301 acute, class 230) that moves neither way against U+094D (a
 * virama, class 9). Marks that change under NFD are not tested (no virama does). */
let viramas: ReadonlySet<number> | null = null;
export function isVirama(cp: number): boolean {
  if (!viramas) {
    const set = new Set<number>();
    const marks = /^\p{M}$/u;
    for (let c = 0x300; c < 0x20000; c++) {
      if (c === 0xd800) c = 0xe000;
      const m = String.fromCodePoint(c);
      if (!marks.test(m) || m.normalize('NFD') !== m) continue;
      const x = `a\u0301${m}`;
      const nonzeroBelow230 = x.normalize('NFD') !== x;
      const y = `a${m}\u094d`;
      const z = `a\u094d${m}`;
      if (nonzeroBelow230 && y.normalize('NFD') === y && z.normalize('NFD') === z) set.add(c);
    }
    viramas = set;
  }
  return viramas.has(cp);
}
