fn main() {
    let args: Vec<String> = std::env::args().collect();
    let t = parlance::ChatTemplate::from_path(&args[1]).unwrap();
    let req = parlance::RenderRequest::from_path(std::path::Path::new(&args[2])).unwrap();
    let (c, o) = req.into_parts().unwrap();
    match t.render(&c, &o) { Ok(s) => print!("{s}"), Err(e) => eprintln!("ERR {e}") }
}
