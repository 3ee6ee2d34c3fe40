//! Vulkan external memory (lavapipe in CI, the real GPU in the device check): exported memory
//! imported again as a second buffer aliases the first, and a compositor with external input
//! composes frames it never uploaded (written through such an alias, as CUDA writes them on a
//! GPU host) exactly like the upload path does.

use crate::common::*;
use vidforge_gpu::{
    ColorSpec, GpuCompositor, GpuContext, InputLayout, Position, SemiPlanarFrame, SourceFormat,
    SourceFrame, WatermarkImage, Yuv420Frame, place_watermark, prepare_watermark,
};

/// The context, which on Vulkan must have external memory (lavapipe and NVIDIA both do).
fn interop_context(test: &str) -> Option<GpuContext> {
    let ctx = context(test)?;
    match ctx.interop() {
        Ok(info) => eprintln!("[{test}] external memory, device {:02x?}", info.device_uuid),
        Err(e) if ctx.adapter().backend != "vulkan" => {
            eprintln!("[{test}] SKIPPED: no external memory off Vulkan ({e})");
            return None;
        }
        Err(e) => panic!("[{test}] a Vulkan device without external memory: {e}"),
    }
    Some(ctx)
}

/// Blocks (30 s at most) until the queue has run everything submitted.
fn settle(ctx: &GpuContext) {
    ctx.device()
        .poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout: Some(std::time::Duration::from_secs(30)),
        })
        .expect("poll");
}

/// `buffer`'s first `len` bytes, read back through a mappable copy.
fn read_buffer(ctx: &GpuContext, buffer: &wgpu::Buffer, len: u64) -> Vec<u8> {
    let (device, queue) = (ctx.device(), ctx.queue());
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("test readback"),
        size: len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, len);
    queue.submit([encoder.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |r| r.expect("map"));
    settle(ctx);
    staging.get_mapped_range(..).expect("mapped").to_vec()
}

#[test]
fn exported_memory_imported_again_aliases_the_same_bytes() {
    let Some(ctx) = interop_context("interop_alias") else {
        return;
    };
    let size = 64 * 1024 + 12;
    let (original, exported) = ctx.export_buffer(size, "exported").expect("export");
    assert_eq!(exported.buffer_size, size);
    assert!(exported.allocation_size >= size);
    let alias = ctx.import_buffer(exported, "alias").expect("import");
    let pattern: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    ctx.queue().write_buffer(&alias, 0, &pattern);
    ctx.queue().submit([]);
    settle(&ctx);
    assert!(
        read_buffer(&ctx, &original, size) == pattern,
        "bytes written through the import are not what the exported buffer holds"
    );
    // And the other way round.
    let back: Vec<u8> = pattern.iter().rev().copied().collect();
    ctx.queue().write_buffer(&original, 0, &back);
    ctx.queue().submit([]);
    settle(&ctx);
    assert!(read_buffer(&ctx, &alias, size) == back);
}

/// `frame`'s planes laid out as `layout` says (pitched rows, padding 0xEE), as a writer
/// outside the compositor would place them.
fn laid_out(frame: &SourceFrame, layout: &InputLayout) -> Vec<u8> {
    let mut bytes = vec![0xEE; layout.size as usize];
    for (p, &(data, stride)) in layout.planes.iter().zip(&frame.planes) {
        for r in 0..p.rows as usize {
            let at = p.offset as usize + r * p.pitch as usize;
            let row = p.row_bytes as usize;
            bytes[at..at + row].copy_from_slice(&data[r * stride..r * stride + row]);
        }
    }
    bytes
}

/// Frames written into a compositor's exported inputs through Vulkan aliases (no upload by
/// the compositor) come out bit-exact with the upload path's, in order, for NV12 and P010,
/// through a ring that wraps several times; host frames submitted to the same compositor
/// (the fallback for frames that cannot be copied) agree too.
#[test]
fn compositor_composes_frames_it_did_not_upload() {
    let Some(ctx) = interop_context("interop_compose") else {
        return;
    };
    // An odd width: rows are not multiples of the pitch alignment.
    let (sw, sh, ow, oh) = (330, 186, 160, 90);
    let logo = WatermarkImage {
        width: 40,
        height: 20,
        rgba: [230, 20, 40, 200].repeat(40 * 20),
    };
    let placement = place_watermark(ow, oh, 40, 20, Position::BottomRight).expect("fits");
    let frames: Vec<Yuv420Frame> = (0..5)
        .map(|i| {
            let mut f = synthetic_frame(sw, sh);
            f.y.iter_mut().for_each(|v| *v = v.wrapping_add(i * 9));
            f
        })
        .collect();
    for format in [SourceFormat::Nv12, SourceFormat::P010] {
        let mut cfg = config(sw, sh, ow, oh);
        cfg.src_format = format;
        cfg.watermark = Some(prepare_watermark(&logo, placement, 0.6, ColorSpec::OUTPUT));
        let semi: Vec<SemiPlanarFrame> = frames
            .iter()
            .map(|f| SemiPlanarFrame::from_yuv420(f, format, 1))
            .collect();
        let mut upload = GpuCompositor::new(&ctx, cfg.clone(), 2).expect("upload compositor");
        let mut want = Vec::new();
        for f in &semi {
            want.extend(upload.submit(f).expect("upload submit"));
        }
        want.extend(upload.finish().expect("upload finish"));

        let mut external =
            GpuCompositor::with_external_input(&ctx, cfg, 2).expect("external compositor");
        assert!(external.has_external_input());
        let layout = external.input_layout();
        assert_eq!(layout.planes.len(), 2);
        assert!(
            layout
                .planes
                .iter()
                .all(|p| p.pitch % 512 == 0 && p.offset % 512 == 0)
        );
        let aliases: Vec<wgpu::Buffer> = external
            .take_exported_inputs()
            .into_iter()
            .map(|m| ctx.import_buffer(m, "test alias").expect("import"))
            .collect();
        assert_eq!(aliases.len(), 2);
        assert!(
            external.take_exported_inputs().is_empty(),
            "handed out once"
        );
        let mut got = Vec::new();
        for f in &semi {
            let bytes = laid_out(&f.as_source(), &layout);
            let out = external.submit_filled(|slot| {
                ctx.queue().write_buffer(&aliases[slot], 0, &bytes);
                ctx.queue().submit([]);
                settle(&ctx);
                Ok::<(), vidforge_gpu::GpuError>(())
            });
            got.extend(out.expect("external submit"));
        }
        got.extend(external.finish().expect("external finish"));
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g == w,
                "{format:?} frame {i}: external input differs from upload"
            );
        }
        // A host frame through the same compositor's inputs.
        let host = external.compose_one(&semi[3]).expect("host frame");
        assert!(
            host == want[3],
            "{format:?}: host frame into external input differs"
        );
        let times = external.hop_times();
        assert_eq!(times.frames, 6, "{times:?}");
    }
}

/// A fill that fails leaves its slot free and the ring usable; a compositor that uploads
/// refuses external fills.
#[test]
fn a_failed_fill_frees_its_slot() {
    let Some(ctx) = interop_context("interop_failed_fill") else {
        return;
    };
    let mut cfg = config(64, 32, 32, 16);
    cfg.src_format = SourceFormat::Nv12;
    let mut external = GpuCompositor::with_external_input(&ctx, cfg.clone(), 1).expect("new");
    let failed = external.submit_filled(|_| Err(vidforge_gpu::GpuError::Interop("copy".into())));
    assert!(matches!(failed, Err(vidforge_gpu::GpuError::Interop(_))));
    assert_eq!(external.in_flight(), 0);
    let filled = external.submit_filled(|_| Ok::<(), vidforge_gpu::GpuError>(()));
    assert!(filled.expect("the slot is free again").is_none());
    assert_eq!(external.finish().expect("finish").len(), 1);

    let mut upload = GpuCompositor::new(&ctx, cfg, 1).expect("new");
    assert!(!upload.has_external_input());
    assert!(upload.take_exported_inputs().is_empty());
    let refused = upload.submit_filled(|_| Ok::<(), vidforge_gpu::GpuError>(()));
    assert!(matches!(refused, Err(vidforge_gpu::GpuError::Interop(_))));
}
