mod common;
use common::*;
use vidforge_media::fixtures::{ClipSpec, Pattern};
use vidforge_media::*;

fn plane_psnr(a: &[u8], b: &[u8]) -> f64 {
    let se: f64 = a.iter().zip(b).map(|(x, y)| { let d = *x as f64 - *y as f64; d * d }).sum();
    10.0 * (255.0f64 * 255.0 / (se / a.len() as f64)).log10()
}

#[test]
fn dbg() {
    unsafe { std::env::set_var("WGPU_BACKEND", "vulkan") };
    let gpu = Engine::new(BackendChoice::Wgpu).unwrap();
    let cpu = cpu();
    let dir = tempdir();
    for (name, pat) in [("testsrc", Pattern::TestSrc), ("solid", Pattern::Solid([0x33,0x66,0xcc]))] {
        for (w,h) in [(640u32,360u32),(1920,1080)] {
            let src = clip(dir.path(), ClipSpec { seconds: 0.1, audio: false, pattern: pat.clone(), ..ClipSpec::h264(w, h) });
            let j = job(&src, &dir.path().join("u.mp4"), Resolution::P720, OutputFormat::Mp4);
            let a = &gpu.compose_frames(&j, 1).unwrap()[0];
            let b = &cpu.compose_frames(&j, 1).unwrap()[0];
            println!("{name} {w}x{h}: Y {:.1} U {:.1} V {:.1}; gpu mean {:?} cpu mean {:?}", plane_psnr(&a.y,&b.y), plane_psnr(&a.u,&b.u), plane_psnr(&a.v,&b.v),
                mean_yuv(a, 0,0,1280,720), mean_yuv(b,0,0,1280,720));
            // row 100 first 40 luma values
            println!(" gpu row: {:?}", &a.y[100*1280+600..100*1280+640]);
            println!(" cpu row: {:?}", &b.y[100*1280+600..100*1280+640]);
        }
    }
}

#[test]
fn dbg_direct() {
    use vidforge_media::gpu::*;
    unsafe { std::env::set_var("WGPU_BACKEND", "vulkan") };
    let ctx = GpuContext::new(AdapterPreference::AllowSoftware).unwrap();
    for (sw, sh) in [(640u32, 360u32), (1920, 1080)] {
        let cfg = ComposeConfig { src_width: sw, src_height: sh, src_color: ColorSpec::OUTPUT, rotation: Rotation::None,
            out_width: 1280, out_height: 720, out_color: ColorSpec::OUTPUT, watermark: None };
        let mut g = GpuCompositor::new(&ctx, cfg, 3).unwrap();
        let f = Yuv420Frame::filled(sw, sh, [100, 180, 98]);
        let one = g.compose_one(&f).unwrap();
        println!("{sw}x{sh} compose_one: {:?}", mean_yuv(&one, 0, 0, 1280, 720));
        let mut outs: Vec<_> = g.submit(&f).unwrap().into_iter().collect();
        outs.extend(g.finish().unwrap());
        println!("{sw}x{sh} submit+finish: {:?}", mean_yuv(&outs[0], 0, 0, 1280, 720));
        let mut outs = Vec::new();
        for _ in 0..5 { outs.extend(g.submit(&f).unwrap()); }
        outs.extend(g.finish().unwrap());
        for o in &outs { print!("{:?} ", mean_yuv(o, 0, 0, 1280, 720)[0]); }
        println!();
    }
}
