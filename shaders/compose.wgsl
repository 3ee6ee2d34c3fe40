// vidforge compose pass: ONE dispatch turns a planar 8-bit YUV 4:2:0 source frame into the
// output frame. Per output sample it
//   1. resamples its own plane (separable filter, weights precomputed per output column/row,
//      rotation folded into the source addressing),
//   2. converts colour between source and output specs (an affine on YUV),
//   3. alpha-blends the prepared watermark with the integer rule shared by every backend:
//      out = (dst * (255 - a) + wm * a + 127) / 255.
//
// Work layout: every workgroup handles 64 words (256 samples) of ONE row of ONE plane, chosen
// from the workgroup id alone. Plane parameters, row weights and loop bounds are therefore
// uniform across the workgroup (scalar loads, no divergence); only the column varies per
// invocation. Each invocation writes one u32 = 4 consecutive samples, so writes never race.
// Output rows are padded to whole words (`row_words`); the host strips the padding.

struct Plane {
    out_w: u32,
    out_h: u32,
    // First output word of this plane and the words per output row.
    word_start: u32,
    row_words: u32,
    // Byte address of display-space sample (0, 0) of this plane in `src`, and the address step
    // for +1 display column / +1 display row (negative or +-width when rotated).
    src_off: i32,
    src_sx: i32,
    src_sy: i32,
    // The other chroma plane's display origin (used when colour conversion mixes U and V).
    other_off: i32,
    // Offsets (in u32 words) into `weights`: per-column start sample, per-column weights, ...
    col_start: u32,
    col_w: u32,
    taps_x: u32,
    row_start: u32,
    row_w: u32,
    taps_y: u32,
    // Watermark rectangle in this plane's samples (empty when there is none) and byte
    // offsets of its values and alphas in `wm`.
    wm_x: u32,
    wm_y: u32,
    wm_w: u32,
    wm_h: u32,
    wm_val: u32,
    wm_alpha: u32,
}

struct Params {
    planes: array<Plane, 3>,
    // Colour affine rows (Y, U, V): out = m.x * y + m.y * u + m.z * v + m.w.
    mat: array<vec4<f32>, 3>,
    // Output luma (x, y) -> source display chroma position: (x * a.x + a.y, y * a.z + a.w).
    luma_to_chroma: vec4<f32>,
    // Source display chroma width, height, and its address steps (sx, sy).
    chroma_geom: vec4<i32>,
    // Display origins of the source U and V planes.
    chroma_offs: vec4<i32>,
    // Output luma rows, colour mode (0 identity, 1 per-plane scale, 2 full), workgroups per
    // chroma plane row, output chroma rows.
    misc: vec4<u32>,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> weights: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<u32>;
@group(0) @binding(3) var<storage, read> wm: array<u32>;
@group(0) @binding(4) var<storage, read_write> dst: array<u32>;

fn src_byte(addr: i32) -> f32 {
    let a = u32(addr);
    return f32((src[a >> 2u] >> ((a & 3u) << 3u)) & 0xffu);
}

fn wm_byte(addr: u32) -> u32 {
    return (wm[addr >> 2u] >> ((addr & 3u) << 3u)) & 0xffu;
}

// Separable resample of one plane at output sample (x, y), reading the plane whose display
// origin is `origin` (U and V share geometry, so the same weights serve both). Columns are the
// outer loop: their weights differ per invocation (gathers), row weights are uniform.
fn filtered(p: Plane, origin: i32, x: u32, y: u32) -> f32 {
    let cs = bitcast<i32>(weights[p.col_start + x]);
    let rs = bitcast<i32>(weights[p.row_start + y]);
    let cw = p.col_w + x * p.taps_x;
    let rw = p.row_w + y * p.taps_y;
    let col_addr = origin + rs * p.src_sy + cs * p.src_sx;
    let acc = bitcast<f32>(weights[cw]) * bitcast<f32>(weights[rw]) * src_byte(col_addr);
    return acc;
}

// Bilinear source chroma (U, V) at an output luma position. Only used when the colour matrix
// changes, where chroma enters luma with small coefficients: bilinear is plenty there.
fn chroma_at_luma(x: u32, y: u32) -> vec2<f32> {
    let m = params.luma_to_chroma;
    let g = params.chroma_geom;
    let o = params.chroma_offs;
    let fx = clamp(f32(x) * m.x + m.y, 0.0, f32(g.x - 1));
    let fy = clamp(f32(y) * m.z + m.w, 0.0, f32(g.y - 1));
    let x0 = i32(fx);
    let y0 = i32(fy);
    let x1 = min(x0 + 1, g.x - 1);
    let y1 = min(y0 + 1, g.y - 1);
    let tx = fx - f32(x0);
    let ty = fy - f32(y0);
    let a00 = x0 * g.z + y0 * g.w;
    let a10 = x1 * g.z + y0 * g.w;
    let a01 = x0 * g.z + y1 * g.w;
    let a11 = x1 * g.z + y1 * g.w;
    let u = mix(mix(src_byte(o.x + a00), src_byte(o.x + a10), tx),
                mix(src_byte(o.x + a01), src_byte(o.x + a11), tx), ty);
    let v = mix(mix(src_byte(o.y + a00), src_byte(o.y + a10), tx),
                mix(src_byte(o.y + a01), src_byte(o.y + a11), tx), ty);
    return vec2<f32>(u, v);
}

fn sample(p: Plane, pi: u32, x: u32, y: u32) -> u32 {
    let mode = params.misc.y;
    let own = filtered(p, p.src_off, x, y);
    var val = own;
    if (mode != 0u) {
        let m = params.mat[pi];
        if (mode == 1u) {
            val = fma(m[pi], own, m.w);
        } else if (pi == 0u) {
            let c = chroma_at_luma(x, y);
            val = m.x * own + m.y * c.x + m.z * c.y + m.w;
        } else {
            // Chroma never depends on luma (m.x == 0), only on both chroma planes.
            let other = filtered(p, p.other_off, x, y);
            var u = own;
            var v = other;
            if (pi == 2u) {
                u = other;
                v = own;
            }
            val = m.y * u + m.z * v + m.w;
        }
    }
    var out = u32(clamp(floor(val + 0.5), 0.0, 255.0));
    // Unsigned wrap makes positions left of / above the rectangle fail the test too.
    let dx = x - p.wm_x;
    let dy = y - p.wm_y;
    if (dx < p.wm_w && dy < p.wm_h) {
        let i = dy * p.wm_w + dx;
        let a = wm_byte(p.wm_alpha + i);
        let s = wm_byte(p.wm_val + i);
        out = (out * (255u - a) + s * a + 127u) / 255u;
    }
    return out;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // Row slots 0..luma_rows are luma rows; the rest are chroma rows, where the first
    // `misc.z` workgroups of a slot do U and the next `misc.z` do V.
    let luma_rows = params.misc.x;
    let is_chroma = wg.y >= luma_rows;
    let is_v = is_chroma && wg.x >= params.misc.z;
    let pi = select(select(0u, 1u, is_chroma), 2u, is_v);
    let row = select(wg.y, wg.y - luma_rows, is_chroma);
    let group = select(wg.x, wg.x - params.misc.z, is_v);
    let p = params.planes[pi];
    let word = group * 64u + lid;
    let valid = row < p.out_h && word < p.row_words;
    let x0 = word * 4u;
    let xm = p.out_w - 1u;
    let packed = u32(filtered(p, p.src_off, min(x0, xm), row))
        | (u32(filtered(p, p.src_off, min(x0 + 1u, xm), row)) << 8u)
        | (u32(filtered(p, p.src_off, min(x0 + 2u, xm), row)) << 16u)
        | (u32(filtered(p, p.src_off, min(x0 + 3u, xm), row)) << 24u);
    dst[select(0u, p.word_start + row * p.row_words + word, valid)] = packed;
}
