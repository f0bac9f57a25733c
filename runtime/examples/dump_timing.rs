use skillc_runtime::xdna2::builder::plan_for;
use skillc_runtime::xdna2::calibration::{default_models_dir, load_model};
use skillc_runtime::xdna2::cost::{time_plan, StepTiming};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::committed_params;
use skillc_runtime::xdna2::plan::{Phase, PlanOptions};

fn main() {
    let model = std::env::args().nth(1).unwrap();
    let device = Device::npu2();
    let params = committed_params();
    let arch = load_model(&default_models_dir(), &model).unwrap();
    for (phase, seq) in [(Phase::Prefill, 2048), (Phase::Decode, 128)] {
        let plan = plan_for(
            &model,
            &arch,
            &device,
            phase,
            seq,
            &PlanOptions::reference(),
        )
        .unwrap();
        let t = time_plan(&plan, &device, &params);
        println!("== {model} {phase:?}: total {:.3} ms, layer {:.3} ms x {}, prologue {:.3}, epilogue {:.3}", t.total_s*1e3, t.layer_s*1e3, t.num_layers, t.prologue_s*1e3, t.epilogue_s*1e3);
        for s in &t.steps {
            match s {
                StepTiming::Call(c) => {
                    println!(
                        "  {:?} call {:<24} {:8.3} ms (disp {:.3} wr {:.3} rd {:.3} sync {:.3})",
                        c.section,
                        c.name,
                        c.total_s * 1e3,
                        c.dispatch_s * 1e3,
                        c.write_s * 1e3,
                        c.read_s * 1e3,
                        c.sync_s * 1e3
                    );
                    for l in &c.launches {
                        println!(
                            "      {:?} {:<28} {:8.3} ms (comp {:.3} data {:.3} ovh {:.3})",
                            l.kernel,
                            l.shape,
                            l.total_s * 1e3,
                            l.compute_s * 1e3,
                            l.data_s * 1e3,
                            l.overhead_s * 1e3
                        );
                    }
                }
                StepTiming::Host(h) => println!(
                    "  {:?} host {:<24} {:8.3} ms",
                    h.section,
                    h.op,
                    h.seconds * 1e3
                ),
            }
        }
    }
}
