// Scratch: what `skillc calibrate --fit` does, without building the CLI.
use skillc_runtime::xdna2::calibration::{
    data_dir, default_models_dir, load_model, write_plan_files, DataSet, Prepared,
};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::{fit, fitted_file};

fn main() {
    let data = data_dir();
    let device =
        Device::from_json(&std::fs::read_to_string(data.join("npu2.json")).unwrap()).unwrap();
    let arch = load_model(&default_models_dir(), "llama-3.2-1b").unwrap();
    let (dataset, _) = DataSet::load(&data).unwrap();
    write_plan_files(&dataset, &data, &arch, &device).unwrap();
    let prepared = Prepared::load(&device, &data, &default_models_dir()).unwrap();
    let outcome = fit(&prepared, &device);
    let report = prepared.report(&device, &outcome.params);
    let file = fitted_file(&prepared, &device, &outcome, &report);
    std::fs::write(data.join("fitted.json"), file.to_json()).unwrap();
    println!(
        "fit {:?}\nheld {:?}\nlofo {:?}",
        file.fit, file.held_out, file.leave_one_family_out.summary
    );
}
