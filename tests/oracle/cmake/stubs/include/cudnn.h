// tdev oracle stub
