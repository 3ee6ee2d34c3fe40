// vidforge compose pass: ONE compute pass turns a YUV 4:2:0 source frame (planar 8-bit, NV12
// or P010: the planes' byte addressing below covers all three) into the output frame, 8-bit
// or (OUT16, HDR kept) 10-bit in 16-bit samples (two dispatches of this entry point, luma
// then chroma, each specialised by the pipeline constants below). Per output sample it
//   1. resamples its own plane with a separable filter: exact-coverage box ("area") on
//      shrinking axes, cubic convolution (B = 0, C = 0.6) on enlarging ones, centre-aligned
//      (output o covers source [o * r, (o + 1) * r]), rotation folded into the addressing;
//   2. converts colour between source and output specs (an affine on YUV), or tone-maps an
//      HDR source to SDR (`tonemap` below, the twin of gpu/src/frame/tonemap.rs, whose
//      constants it reads from the uniforms);
//   3. alpha-blends the prepared watermark with the integer rule shared by every backend:
//      out = (dst * (255 - a) + wm * a + 127) / 255, on code values of the output's depth.
//
// Filter weights are computed from the sample position rather than read from tables: on
// software adapters (lavapipe) every divergent storage load costs a per-lane loop, while
// arithmetic is vectorised, and on GPUs either is cheap. The CPU-side twin of this math is
// `filter::axis_filter`.
//
// Work layout: every workgroup handles 64 words (256 samples) of ONE row of ONE plane, chosen
// from the workgroup id alone, so plane parameters and the row's filter are uniform across
// it. Each invocation writes 4 consecutive samples, one u32 (8-bit) or two (16-bit), so
// writes never race. Output rows are padded to whole words (`row_words`); the host strips
// the padding. Invocations past a row's end compute clamped samples and store them in the
// scratch words after the frame.

struct Plane {
    out_w: u32,
    out_h: u32,
    // First output word of this plane and the words per output row.
    word_start: u32,
    row_words: u32,
    // Byte address in `src` of display sample (0, 0), and the address steps for +1 display
    // column / +1 display row (negative or +-width when rotated).
    src_off: i32,
    src_sx: i32,
    src_sy: i32,
    // The other chroma plane's display origin (colour conversion mixes U and V).
    oth_off: i32,
    // Source size in display orientation.
    src_w: u32,
    src_h: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
    // Watermark rectangle in this plane's samples (0x0 when none) and the byte offset in `wm`
    // of its (value, alpha) pairs, row-major: byte pairs, or with OUT16 one word per pair
    // (value | alpha << 16).
    wm_x: u32,
    wm_y: u32,
    wm_w: u32,
    wm_h: u32,
    wm_off: u32,
    _pad4: u32,
}

// The constants of the HDR -> SDR chain (`ToneUniforms` in gpu/src/frame/tonemap.rs).
struct Tone {
    to_rgb: array<vec4<f32>, 3>,
    gamut: array<vec4<f32>, 3>,
    to_yuv: array<vec4<f32>, 3>,
    // 1/m2, c1, c2, c3.
    pq: vec4<f32>,
    // a, b, c, system gamma.
    hlg: vec4<f32>,
    hable: array<vec4<f32>, 2>,
    // 1/m1, display light per unit, 1/hable(peak), signal floor.
    scale: vec4<f32>,
    // Transfer (0 PQ, 1 HLG), output signal exponent (1 / 2.4).
    misc: vec4<f32>,
}

struct Params {
    planes: array<Plane, 3>,
    // Colour affine rows (Y, U, V): out = m.x * y + m.y * u + m.z * v + m.w.
    mat: array<vec4<f32>, 3>,
    // Output luma (x, y) -> source display chroma position: (x * a.x + a.y, y * a.z + a.w).
    luma_to_chroma: vec4<f32>,
    // Output luma rows, colour mode, workgroups per chroma plane row (used: the U/V split),
    // output chroma rows. Rows and mode are informational: the pipeline constants rule.
    misc: vec4<u32>,
    // Source display chroma width and height, index of the first of two scratch words, unused.
    misc2: vec4<u32>,
    // Output chroma (x, y) -> source display luma position (tone mapping).
    chroma_to_luma: vec4<f32>,
    tone: Tone,
}

// Pipeline constants: each (plane group, config) gets its own specialised pipeline, so the
// filter loops have constant bounds (unrolled) and unused features compile away.
// Chroma (U and V) instead of luma.
override IS_CHROMA: bool = false;
// 16-bit little-endian source samples (P010: the value in the high 10 bits) instead of bytes.
// Samples are read on the 8-bit code scale (value / 256), so the rest of the pass is shared.
override SAMPLE16: bool = false;
// 10-bit output samples, little-endian 16 bits each (HDR kept), instead of bytes. The pass
// still works on the 8-bit code scale; the 10-bit code of a limited-range value is 4 times
// its 8-bit one.
override OUT16: bool = false;
// Colour conversion: 0 identity, 1 per-plane scale + offset, 2 full matrix, 3 HDR tone map.
override MODE: u32 = 0u;
override HAS_WATERMARK: bool = false;
// Kernel per axis (0 area, 1 bicubic) and taps per axis.
override KERN_X: u32 = 0u;
override KERN_Y: u32 = 0u;
override TAPS_X: u32 = 1u;
override TAPS_Y: u32 = 1u;
// Unrotated source rows are contiguous bytes: an invocation then loads the few words holding
// its four samples' windows once per source row (ROW_WORDS of them, at most MAX_ROW_WORDS)
// instead of one word per tap.
override FAST_ROWS: bool = false;
override ROW_WORDS: u32 = 1u;
// Bytes between horizontally adjacent samples of a fast row: 1 for planar, 2 for the
// interleaved U/V of NV12 (the other plane's samples sit between ours and are skipped).
override ROW_STEP: u32 = 1u;
const MAX_ROW_WORDS: u32 = 8u;
// Taps of a fast row at most: its window fits MAX_ROW_WORDS words (32 bytes).
const MAX_FAST_TAPS: u32 = 32u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> wm: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

// The source sample at byte `addr`, on the 8-bit code scale.
fn src_byte(addr: i32) -> f32 {
    let a = u32(addr);
    if (SAMPLE16) {
        return f32((src[a >> 2u] >> ((a & 2u) << 3u)) & 0xffffu) * (1.0 / 256.0);
    }
    return f32((src[a >> 2u] >> ((a & 3u) << 3u)) & 0xffu);
}

// Where an output sample's filter window starts, and the footprint position relative to it.
struct Window {
    start: i32,
    // Area: footprint start within source sample `start` (0..1).
    // Bicubic: filter centre relative to `start` (1..2).
    frac: f32,
    ratio: f32,
}

fn window(o: u32, n_src: u32, n_dst: u32, kernel: u32) -> Window {
    let ratio = f32(n_src) / f32(n_dst);
    // Area: footprint [o * r, (o + 1) * r]. Bicubic: centre (o + 0.5) * r - 0.5, taps from
    // floor(centre) - 1.
    let pos = select(f32(o) * ratio, (f32(o) + 0.5) * ratio - 0.5, kernel == 1u);
    let fl = floor(pos);
    let back = select(0.0, 1.0, kernel == 1u);
    return Window(i32(fl) - i32(back), pos - fl + back, ratio);
}

fn weight(w: Window, kernel: u32, t: u32) -> f32 {
    let ft = f32(t);
    // Area: how much of source sample t (spanning [t, t + 1]) the footprint covers.
    let area = clamp(min(w.frac + w.ratio, ft + 1.0) - max(w.frac, ft), 0.0, 1.0);
    // Cubic convolution, B = 0, C = 0.6 (swscale's SWS_BICUBIC defaults).
    let d = abs(ft - w.frac);
    let near = (1.4 * d - 2.4) * d * d + 1.0;
    let far = ((-0.6 * d + 3.0) * d - 4.8) * d + 2.4;
    let cubic = select(select(0.0, far, d < 2.0), near, d < 1.0);
    return select(area, cubic, kernel == 1u);
}

// Separable resample of one plane at output sample (x, y), reading the plane whose display
// origin is `origin` (U and V share geometry). Edge samples repeat: clamped taps keep their
// weight; weights are normalised by their sum.
fn filtered(p: Plane, origin: i32, x: u32, y: u32) -> f32 {
    let wx = window(x, p.src_w, p.out_w, KERN_X);
    let wy = window(y, p.src_h, p.out_h, KERN_Y);
    let last_x = i32(p.src_w) - 1;
    let last_y = i32(p.src_h) - 1;
    var sum_y = 0.0;
    for (var j = 0u; j < TAPS_Y; j++) {
        sum_y += weight(wy, KERN_Y, j);
    }
    var acc = 0.0;
    var sum_x = 0.0;
    for (var t = 0u; t < TAPS_X; t++) {
        let kx = weight(wx, KERN_X, t);
        let col = origin + clamp(wx.start + i32(t), 0, last_x) * p.src_sx;
        var s = 0.0;
        for (var j = 0u; j < TAPS_Y; j++) {
            let row = clamp(wy.start + i32(j), 0, last_y);
            s = fma(weight(wy, KERN_Y, j), src_byte(col + row * p.src_sy), s);
        }
        acc = fma(kx, s, acc);
        sum_x += kx;
    }
    return acc / (sum_x * sum_y);
}

// Byte `k` of the words loaded for one source row.
fn pick(words: array<u32, MAX_ROW_WORDS>, k: i32) -> f32 {
    let wi = u32(k) >> 2u;
    var w = words[0];
    for (var i = 1u; i < ROW_WORDS; i++) {
        w = select(w, words[i], wi == i);
    }
    return f32((w >> ((u32(k) & 3u) << 3u)) & 0xffu);
}

// The four samples x .. x + 3 of one row (x + k clamped to the row), sharing word loads.
fn filtered4(p: Plane, origin: i32, x: u32, y: u32) -> vec4<f32> {
    let last_out = p.out_w - 1u;
    let xs = min(vec4<u32>(x, x + 1u, x + 2u, x + 3u), vec4<u32>(last_out));
    if (!FAST_ROWS) {
        return vec4<f32>(filtered(p, origin, xs.x, y), filtered(p, origin, xs.y, y),
                         filtered(p, origin, xs.z, y), filtered(p, origin, xs.w, y));
    }
    let w0 = window(xs.x, p.src_w, p.out_w, KERN_X);
    let w1 = window(xs.y, p.src_w, p.out_w, KERN_X);
    let w2 = window(xs.z, p.src_w, p.out_w, KERN_X);
    let w3 = window(xs.w, p.src_w, p.out_w, KERN_X);
    let wy = window(y, p.src_h, p.out_h, KERN_Y);
    let last_x = i32(p.src_w) - 1;
    let last_y = i32(p.src_h) - 1;
    let starts = vec4<i32>(w0.start, w1.start, w2.start, w3.start);
    // Windows only move right, so the lowest clamped index needed is the first one.
    let base = clamp(w0.start, 0, last_x);
    let step = i32(ROW_STEP);
    // The horizontal weights and byte offsets do not depend on the row: computed once here,
    // not once per source row (a 4x4 bicubic enlargement spent most of its time recomputing
    // them). The loops have constant bounds, so these arrays live in registers.
    var kxs: array<vec4<f32>, MAX_FAST_TAPS>;
    var offs: array<vec4<i32>, MAX_FAST_TAPS>;
    var sum_x = vec4<f32>(0.0);
    for (var t = 0u; t < TAPS_X; t++) {
        let kx = vec4<f32>(weight(w0, KERN_X, t), weight(w1, KERN_X, t), weight(w2, KERN_X, t), weight(w3, KERN_X, t));
        kxs[t] = kx;
        sum_x += kx;
        offs[t] = (clamp(starts + i32(t), vec4<i32>(0), vec4<i32>(last_x)) - base) * step;
    }
    var acc = vec4<f32>(0.0);
    var sum_y = 0.0;
    for (var j = 0u; j < TAPS_Y; j++) {
        let ky = weight(wy, KERN_Y, j);
        sum_y += ky;
        let addr = u32(origin + clamp(wy.start + i32(j), 0, last_y) * p.src_sy + base * step);
        var words: array<u32, MAX_ROW_WORDS>;
        for (var i = 0u; i < ROW_WORDS; i++) {
            words[i] = src[(addr >> 2u) + i];
        }
        let skew = vec4<i32>(i32(addr & 3u));
        var s = vec4<f32>(0.0);
        for (var t = 0u; t < TAPS_X; t++) {
            let k = offs[t] + skew;
            s += kxs[t] * vec4<f32>(pick(words, k.x), pick(words, k.y), pick(words, k.z), pick(words, k.w));
        }
        acc += ky * s;
    }
    return acc / (sum_x * sum_y);
}

// Where a bilinear sample of a source plane reads: the display position `pos` (clamped to
// `dims`) of an output sample, mapped by `m`: (x * m.x + m.y, y * m.z + m.w).
struct Taps {
    // Address offsets from the plane origin: (x0, y0), (x1, y0), (x0, y1), (x1, y1).
    a: vec4<i32>,
    t: vec2<f32>,
}

fn bilinear_taps(p: Plane, m: vec4<f32>, dims: vec2<i32>, x: u32, y: u32) -> Taps {
    let f = clamp(vec2<f32>(f32(x) * m.x + m.y, f32(y) * m.z + m.w), vec2<f32>(0.0), vec2<f32>(dims - 1));
    let i0 = vec2<i32>(f);
    let i1 = min(i0 + 1, dims - 1);
    let cols = vec2<i32>(i0.x, i1.x) * p.src_sx;
    let rows = vec2<i32>(i0.y, i1.y) * p.src_sy;
    return Taps(vec4<i32>(cols.x + rows.x, cols.y + rows.x, cols.x + rows.y, cols.y + rows.y), f - vec2<f32>(i0));
}

// The bilinear sample at `taps` of the plane whose display origin is `origin`.
fn bilinear(taps: Taps, origin: i32) -> f32 {
    let a = taps.a;
    let t = taps.t;
    return mix(mix(src_byte(origin + a.x), src_byte(origin + a.y), t.x), mix(src_byte(origin + a.z), src_byte(origin + a.w), t.x), t.y);
}

// Bilinear source chroma (U, V) at an output luma position. Used when the colour matrix
// changes, where chroma enters luma with small coefficients (bilinear is plenty there), and
// for tone mapping.
fn chroma_at_luma(x: u32, y: u32) -> vec2<f32> {
    let pu = params.planes[1];
    let dims = vec2<i32>(i32(params.misc2.x), i32(params.misc2.y));
    let taps = bilinear_taps(pu, params.luma_to_chroma, dims, x, y);
    return vec2<f32>(bilinear(taps, pu.src_off), bilinear(taps, pu.oth_off));
}

// Bilinear source luma at an output chroma position (tone mapping: chroma needs luma too).
fn luma_at_chroma(x: u32, y: u32) -> f32 {
    let py = params.planes[0];
    let dims = vec2<i32>(i32(py.src_w), i32(py.src_h));
    return bilinear(bilinear_taps(py, params.chroma_to_luma, dims, x, y), py.src_off);
}

fn affine3(rows: array<vec4<f32>, 3>, v: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(dot(rows[0].xyz, v) + rows[0].w, dot(rows[1].xyz, v) + rows[1].w, dot(rows[2].xyz, v) + rows[2].w);
}

// pow for x >= 0 (WGSL leaves pow(0, y) undefined).
fn pow0(x: vec3<f32>, y: f32) -> vec3<f32> {
    return pow(max(x, vec3<f32>(1e-30)), vec3<f32>(y));
}

// Non-linear signal to display light (1 = the transfer's nominal peak), odd in x: PQ's EOTF,
// or HLG's inverse OETF raised to the system gamma.
fn eotf(x: vec3<f32>) -> vec3<f32> {
    let t = params.tone;
    let v = abs(x);
    var e: vec3<f32>;
    if (t.misc.x == 0.0) {
        let p = pow0(v, t.pq.x);
        let num = max(p - t.pq.y, vec3<f32>(0.0));
        let den = max(t.pq.z - t.pq.w * p, vec3<f32>(1.17549435e-38));
        e = pow0(num / den, t.scale.x);
    } else {
        let scene = select((exp((v - t.hlg.z) / t.hlg.x) + t.hlg.y) / 12.0, v * v / 3.0, v <= vec3<f32>(0.5));
        e = pow0(scene, t.hlg.w);
    }
    return sign(x) * e;
}

fn hable(x: f32) -> f32 {
    let h = params.tone.hable[0];
    let e = params.tone.hable[1];
    return (x * (x * h.x + h.y * h.z) + h.w * e.x) / (x * (x * h.x + h.y) + h.w * e.y) - e.z;
}

// One HDR sample (Y, Cb, Cr on the 8-bit code scale) to output code values: display light
// (1 = 100 nits), BT.2020 -> BT.709 primaries, Hable on the brightest component, the signal
// of a BT.1886 display (odd: out-of-gamut values keep their sign), BT.709.
fn tonemap(yuv: vec3<f32>) -> vec3<f32> {
    let t = params.tone;
    let g = affine3(t.gamut, eotf(affine3(t.to_rgb, yuv)) * t.scale.y);
    let sig = max(max(g.x, g.y), max(g.z, t.scale.w));
    let mapped = g * (hable(sig) * t.scale.z / sig);
    return affine3(t.to_yuv, sign(mapped) * pow0(abs(mapped), t.misc.y));
}

// Colour conversion of one output sample, rounded to a code value of the output's depth.
fn convert(p: Plane, pi: u32, own: f32, other: f32, x: u32, y: u32) -> u32 {
    var val = own;
    // U and V of a chroma sample, whichever plane this is.
    let uv = select(vec2<f32>(own, other), vec2<f32>(other, own), pi == 2u);
    if (MODE == 3u) {
        var yuv: vec3<f32>;
        if (IS_CHROMA) {
            yuv = vec3<f32>(luma_at_chroma(x, y), uv);
        } else {
            yuv = vec3<f32>(own, chroma_at_luma(x, y));
        }
        val = tonemap(yuv)[pi];
    } else if (MODE != 0u) {
        let m = params.mat[pi];
        if (MODE == 1u) {
            val = fma(m[pi], own, m.w);
        } else if (!IS_CHROMA) {
            let c = chroma_at_luma(x, y);
            val = m.x * own + m.y * c.x + m.z * c.y + m.w;
        } else {
            // Chroma never depends on luma (m.x == 0), only on both chroma planes.
            val = m.y * uv.x + m.z * uv.y + m.w;
        }
    }
    if (OUT16) {
        return u32(clamp(floor(val * 4.0 + 0.5), 0.0, 1023.0));
    }
    return u32(clamp(floor(val + 0.5), 0.0, 255.0));
}

// (value, alpha) of the watermark pair at byte `off` of the three loaded words.
fn wm_pair(w: vec3<u32>, off: u32) -> vec2<u32> {
    let word = select(select(w.x, w.y, off >= 4u), w.z, off >= 8u);
    let pair = word >> ((off & 3u) << 3u);
    return vec2<u32>(pair & 0xffu, (pair >> 8u) & 0xffu);
}

// n / 255 for any n < 2^18 (10-bit blends reach 1023 * 255 + 127): the 8-bit estimate
// below is exact up to 255 * 255 + 127 and at most one short beyond.
fn div255(n: vec4<u32>) -> vec4<u32> {
    let q = (n + (n >> vec4<u32>(8u)) + 1u) >> vec4<u32>(8u);
    return q + select(vec4<u32>(0u), vec4<u32>(1u), (q + 1u) * 255u <= n);
}

// The 10-bit watermark blend: one word per (value, alpha) pair, four contiguous words.
fn blend4_16(p: Plane, dx: vec4<i32>, dy: u32, inside: vec4<bool>, v: vec4<u32>) -> vec4<u32> {
    let col = vec4<u32>(clamp(dx, vec4<i32>(0), vec4<i32>(i32(p.wm_w) - 1)));
    let at = vec4<u32>((p.wm_off >> 2u) + dy * p.wm_w) + col;
    let w = vec4<u32>(wm[at.x], wm[at.y], wm[at.z], wm[at.w]);
    let a = select(vec4<u32>(0u), w >> vec4<u32>(16u), inside);
    return div255(v * (255u - a) + (w & vec4<u32>(0xffffu)) * a + 127u);
}

// Blends the watermark into the samples x .. x + 3 of row y. Their four (value, alpha) pairs
// are contiguous in `wm`, so three word loads serve all four (four with OUT16).
fn blend4(p: Plane, x: u32, y: u32, v: vec4<u32>) -> vec4<u32> {
    if (!HAS_WATERMARK) {
        return v;
    }
    let dx = vec4<i32>(i32(x), i32(x) + 1, i32(x) + 2, i32(x) + 3) - i32(p.wm_x);
    // Unsigned wrap makes rows above the rectangle fail the test too.
    let dy = y - p.wm_y;
    let inside = dx >= vec4<i32>(0) & dx < vec4<i32>(i32(p.wm_w)) & vec4<bool>(dy < p.wm_h);
    var out = v;
    if (OUT16 && any(inside)) {
        out = blend4_16(p, dx, dy, inside, v);
    } else if (any(inside)) {
        // Clamped columns keep the four pairs within three words; outside ones get alpha 0.
        let col = vec4<u32>(clamp(dx, vec4<i32>(0), vec4<i32>(i32(p.wm_w) - 1)));
        let bytes = vec4<u32>(p.wm_off + 2u * dy * p.wm_w) + 2u * col;
        let first = bytes.x >> 2u;
        let w = vec3<u32>(wm[first], wm[first + 1u], wm[first + 2u]);
        let rel = bytes - vec4<u32>(first << 2u);
        let p0 = wm_pair(w, rel.x);
        let p1 = wm_pair(w, rel.y);
        let p2 = wm_pair(w, rel.z);
        let p3 = wm_pair(w, rel.w);
        let a = select(vec4<u32>(0u), vec4<u32>(p0.y, p1.y, p2.y, p3.y), inside);
        // n / 255 for n <= 255 * 255 + 127 without an integer division (which CPUs and
        // software rasterisers cannot vectorise): (n + (n >> 8) + 1) >> 8, exact on that range.
        let n = v * (255u - a) + vec4<u32>(p0.x, p1.x, p2.x, p3.x) * a + 127u;
        out = (n + (n >> vec4<u32>(8u)) + 1u) >> vec4<u32>(8u);
    }
    return out;
}

// One dispatch per plane group (luma, then chroma) inside one compute pass.
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Chroma rows: the first `misc.z` workgroups of a row do U, the next `misc.z` do V.
    let is_v = IS_CHROMA && wg.x >= params.misc.z;
    let pi = select(select(0u, 1u, IS_CHROMA), 2u, is_v);
    let word = select(wg.x, wg.x - params.misc.z, is_v) * 64u + lid;
    let p = params.planes[pi];
    let row = wg.y;
    let valid = row < p.out_h && word < p.row_words / select(1u, 2u, OUT16);
    let y = min(row, p.out_h - 1u);
    let x = word * 4u;
    let own = filtered4(p, p.src_off, x, y);
    // The other chroma plane is only needed when the matrix changes or for tone mapping.
    var other = vec4<f32>(0.0);
    if (MODE >= 2u && IS_CHROMA) {
        other = filtered4(p, p.oth_off, x, y);
    }
    let last = p.out_w - 1u;
    let v = blend4(p, x, y, vec4<u32>(
        convert(p, pi, own.x, other.x, min(x, last), y),
        convert(p, pi, own.y, other.y, min(x + 1u, last), y),
        convert(p, pi, own.z, other.z, min(x + 2u, last), y),
        convert(p, pi, own.w, other.w, min(x + 3u, last), y)));
    if (OUT16) {
        let at = select(params.misc2.z, p.word_start + row * p.row_words + 2u * word, valid);
        dst[at] = v.x | (v.y << 16u);
        dst[at + 1u] = v.z | (v.w << 16u);
    } else {
        let packed = v.x | (v.y << 8u) | (v.z << 16u) | (v.w << 24u);
        dst[select(params.misc2.z, p.word_start + row * p.row_words + word, valid)] = packed;
    }
}
