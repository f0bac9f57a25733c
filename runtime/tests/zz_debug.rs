use skillc_runtime::xdna2::{calibration::*, cost::*, device::Device, fit::*, plan::*};
#[test]
fn dbg() {
    let device = Device::npu2();
    let text = std::fs::read_to_string(data_dir().join("fitted.json")).unwrap();
    let params = FittedFile::parse(&text).unwrap().params().unwrap();
    for name in ["plans/llama32_1b-decode-a.json", "plans/llama32_1b-decode-d.json"] {
        let plan = Plan::load(&data_dir().join(name)).unwrap();
        let t = time_plan(&plan, &device, &params);
        println!("== {name} total {:.2} ms layer {:.3} ms epi {:.2}", t.total_s*1e3, t.layer_s*1e3, t.epilogue_s*1e3);
        for s in &t.steps { match s { StepTiming::Call(c) => println!("  call {:30} x{} total {:.3} disp {:.3} w {:.3} ({:.1} MB) r {:.3} sync {:.3} body {:.3}", c.name, c.repeats, c.total_s*1e3, c.dispatch_s*1e3, c.write_s*1e3, c.bytes_written/1e6, c.read_s*1e3, c.sync_s*1e3, c.launches.iter().map(|l| l.total_s).sum::<f64>()*1e3),
          StepTiming::Host(h) => println!("  host {:30} x{} {:.3}", h.op, h.repeats, h.seconds*1e3) } }
    }
}
